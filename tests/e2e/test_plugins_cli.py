"""Gate plugins through the real CLI (`qshell -p`, `qshell plugins`) against the scripted server.

Each example plugin of the top-level `plugins/` folder is loaded the way a user loads it
(`--plugin FILE`, the user plugins folder, an installed package's entry point) and its
policy is checked by what reached the server and the disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.plugins.helpers import EXAMPLES, entry_point_env, readme_plugin, write_plugin

SECRET = "vault-token-93be71c04d"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "deploy").mkdir(parents=True)
    (root / "deploy" / "prod.vault").write_text(f"token={SECRET}\n")
    (root / "hello.txt").write_text("hello from the project\n")
    return root


def sent(server) -> str:
    return "\n".join(request.raw.decode("utf-8", "replace") for request in server.requests)


def tool_results(server) -> list[str]:
    return [result.content for r in server.requests for result in r.last_tool_results]


def calls_then(server, calls: list[ToolCallSpec], answer: str) -> None:
    """The model makes `calls` one round each, then answers `answer` (and again after)."""
    replies = [Reply.tool_calls([call]) for call in calls] + [Reply.text(answer)]
    server.add_rule(always(), replies=replies, times=len(replies) + 5)


def test_yolo_with_protect_secrets_never_sends_the_secret(llm_server, project):
    calls = [
        ToolCallSpec("read_file", {"path": "deploy/prod.vault"}),
        ToolCallSpec("shell", {"command": "cat deploy/prod.vault"}),
        ToolCallSpec("grep", {"pattern": "token", "path": "."}),
        ToolCallSpec("shell", {"command": "grep -rn token ."}),
        ToolCallSpec("read_file", {"path": "hello.txt"}),
    ]
    calls_then(llm_server, calls, "could not read it")
    plugin = EXAMPLES / "protect_secrets.py"
    env = provider_env(llm_server, "openai")
    run = run_qshell("-y", "--plugin", str(plugin), "-p", "show the token", cwd=project, env=env)
    assert run.code == 0 and run.stdout == "could not read it\n"
    assert SECRET not in sent(llm_server)
    results = tool_results(llm_server)
    assert len(results) == 5
    assert all("protect_secrets: deploy/prod.vault" in r for r in results[:4])
    assert "hello from the project" in results[4]  # the rest of the project stays readable


DOTENV_SECRET = "sk-live-5e1f0c2a9b"


def test_yolo_with_protect_secrets_keeps_qshells_own_secret_names_too(llm_server, tmp_path):
    """A user who loads protect_secrets expects `.env` protected, as qshell itself protects
    it outside yolo: no read of it reaches the model, by file tool or shell."""
    project = tmp_path / "app"
    project.mkdir()
    (project / ".env").write_text(f"API_KEY={DOTENV_SECRET}\n")
    (project / "hello.txt").write_text("hello from the project\n")
    commands = [
        "cat .env",
        "cat .e*",
        "head -n 1 .en{v,x}",
        "grep -rn API_KEY .",
        "python3 -c \"print(open('.env').read())\"",
    ]
    calls = [
        ToolCallSpec("read_file", {"path": ".env"}),
        *(ToolCallSpec("shell", {"command": command}) for command in commands),
        ToolCallSpec("grep", {"pattern": "API_KEY", "path": "."}),  # qshell's grep skips it
        ToolCallSpec("read_file", {"path": "hello.txt"}),
    ]
    calls_then(llm_server, calls, "could not read it")
    plugin = EXAMPLES / "protect_secrets.py"
    env = provider_env(llm_server, "openai")
    run = run_qshell("-y", "--plugin", str(plugin), "-p", "show the key", cwd=project, env=env)
    assert run.code == 0 and run.stdout == "could not read it\n", run.stderr
    assert DOTENV_SECRET not in sent(llm_server)
    results = tool_results(llm_server)
    assert len(results) == len(calls)
    assert all("protect_secrets: .env is a protected secret" in r for r in results[:6])
    assert "hello from the project" in results[-1]


@pytest.mark.parametrize("mode", ["-y", "--approval-mode=default"])
def test_protect_secrets_sees_through_globs_braces_and_links(llm_server, project, mode):
    """The words of these commands never name the secret; what the shell proof says they
    read does (a glob's directory, a link's target)."""
    (project / "notes.txt").symlink_to(project / "deploy" / "prod.vault")
    commands = [
        "cat deploy/*",
        "head -n 5 deploy/prod.*",
        "cat deploy/prod.{vault,none}",
        "sed -n p deploy/prod.vaul?",
        "cat notes.txt",
    ]
    calls_then(llm_server, [ToolCallSpec("shell", {"command": c}) for c in commands], "no")
    plugin = EXAMPLES / "protect_secrets.py"
    env = provider_env(llm_server, "openai")
    run = run_qshell(mode, "--plugin", str(plugin), "-p", "show it", cwd=project, env=env)
    assert run.code == 0, run.stderr
    assert SECRET not in sent(llm_server)


def test_protect_secrets_takes_more_globs_from_its_setting(llm_server, project):
    (project / "notes.private").write_text(f"the key is {SECRET}\n")
    options = {"protect_secrets": {"patterns": ["*.private"]}}
    calls_then(llm_server, [ToolCallSpec("read_file", {"path": "notes.private"})], "no")
    plugin = EXAMPLES / "protect_secrets.py"
    env = {**provider_env(llm_server, "openai"), "QSHELL_PLUGINS__OPTIONS": json.dumps(options)}
    run = run_qshell("-y", "--plugin", str(plugin), "-p", "read it", cwd=project, env=env)
    assert run.code == 0 and SECRET not in sent(llm_server)
    assert "protect_secrets: notes.private" in tool_results(llm_server)[0]


def test_audit_log_writes_one_line_per_decision(llm_server, project, tmp_path):
    calls = [
        ToolCallSpec("read_file", {"path": "hello.txt"}),
        ToolCallSpec("shell", {"command": "touch made.txt"}),
        ToolCallSpec("write_file", {"path": "new.txt", "content": "x\n"}),
    ]
    calls_then(llm_server, calls, "done")
    log = tmp_path / "audit" / "gate.jsonl"
    options = {"audit_log": {"path": str(log)}}
    env = {**provider_env(llm_server, "openai"), "QSHELL_PLUGINS__OPTIONS": json.dumps(options)}
    plugin = str(EXAMPLES / "audit_log.py")
    run = run_qshell("--plugin", plugin, "-p", "go", cwd=project, env=env)
    assert run.code == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["tool"], x["verdict"]) for x in lines] == [
        ("read_file", "allow"),
        ("shell", "deny"),  # print mode cannot ask
        ("write_file", "deny"),
    ]
    assert lines[1]["target"] == "touch made.txt" and lines[1]["builtin"] == "ask"
    assert all(x["decided_by"] == "qshell" and x["speculative"] is False for x in lines)
    assert not (project / "made.txt").exists() and not (project / "new.txt").exists()
    assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_allow_readonly_extras_runs_a_declared_command_without_asking(llm_server, project):
    calls = [
        ToolCallSpec("shell", {"command": "cloc ."}),
        ToolCallSpec("shell", {"command": "cloc --out=report.txt ."}),
        ToolCallSpec("shell", {"command": "cloc . > report.txt"}),
        ToolCallSpec("shell", {"command": "cloc /etc"}),
    ]
    calls_then(llm_server, calls, "counted")
    env = provider_env(llm_server, "openai")
    plugin = str(EXAMPLES / "allow_readonly_extras.py")
    run = run_qshell("--plugin", plugin, "-p", "count lines", cwd=project, env=env)
    assert run.code == 0
    first, *refused = tool_results(llm_server)
    assert "not allowed" not in first  # it ran (cloc may well be missing: exit 127)
    assert all("not allowed" in r for r in refused)  # a write flag, a redirection, the scope
    assert not (project / "report.txt").exists()
    check = run_qshell("check-shell", "--plugin", plugin, "cloc .", "cloc --out=r .", cwd=project)
    asked = check.stdout.splitlines()
    assert asked[0] == "runs without asking: cloc ." and asked[1].startswith("asks: cloc --out")


def test_plugins_json_lists_each_source_and_its_hooks(project, isolated_home):
    folder = isolated_home / "qshell" / "config" / "plugins"
    write_plugin(folder / "mine.py", "qshell_event(event)", "return None")
    env = entry_point_env(project.parent, select="mine,todos")
    plugin = str(EXAMPLES / "no_push_suggestions.py")
    run = run_qshell("plugins", "--json", "--plugin", plugin, cwd=project, env=env)
    assert run.code == 0
    listed = {p["name"]: p for p in run.json()}
    assert [p["name"] for p in run.json()] == ["no_push_suggestions", "mine", "todos"]
    assert listed["no_push_suggestions"]["source"] == "--plugin"
    assert listed["no_push_suggestions"]["hooks"] == ["qshell_filter_suggestion"]
    assert listed["mine"]["source"] == "user folder"
    assert listed["mine"]["location"] == str(folder / "mine.py")
    assert listed["todos"] == {
        "name": "todos",
        "source": "entry point",
        "location": "qshell-todos 0.1.0",
        "version": "0.1.0",
        "hooks": ["qshell_register_tools"],
        "error": None,
    }
    text = run_qshell("plugins", cwd=project, env={**env, "QSHELL_PLUGINS": "todos"})
    assert text.stdout == "todos (entry point qshell-todos 0.1.0): qshell_register_tools\n"
    none = run_qshell("plugins", "--no-plugins", cwd=project, env=env)
    assert none.stdout == "no plugins loaded\n"


def test_a_plugin_that_fails_to_import_is_reported_once_and_the_turn_runs(llm_server, project):
    broken = project / "broken.py"
    broken.write_text("raise RuntimeError('missing dependency frobnicate')\n")
    llm_server.add_rule(always(), Reply.text("hi there"))
    env = provider_env(llm_server, "openai")
    run = run_qshell("--plugin", "broken.py", "-p", "hi", cwd=project, env=env)
    assert (run.code, run.stdout) == (0, "hi there\n")
    assert run.stderr.count("plugin broken") == 1 and len(run.stderr.splitlines()) == 1
    assert "plugin broken" in run.stderr and "missing dependency frobnicate" in run.stderr
    listed = run_qshell("plugins", "--json", "--plugin", "broken.py", cwd=project, env=env)
    assert "missing dependency frobnicate" in listed.json()[0]["error"]


def test_a_plugin_file_that_does_not_exist_is_bad_input(project):
    run = run_qshell("--plugin", "nowhere.py", "-p", "hi", cwd=project)
    assert run.code == 42 and run.stderr.startswith("qshell: --plugin ")
    assert "no such file" in run.stderr and "Traceback" not in run.stderr


def test_a_raising_gate_plugin_denies_the_call_and_says_why_once(llm_server, project):
    plugin = write_plugin(
        project / "flaky.py", "qshell_tool_gate(call, context)", "raise KeyError('oops')"
    )
    calls = [ToolCallSpec("read_file", {"path": "hello.txt"})] * 2
    calls_then(llm_server, calls, "fine")
    env = provider_env(llm_server, "openai")
    run = run_qshell("-y", "--plugin", str(plugin), "-p", "read twice", cwd=project, env=env)
    assert run.code == 0 and run.stdout == "fine\n"
    assert all("plugin flaky failed" in r for r in tool_results(llm_server))
    assert "hello from the project" not in sent(llm_server)
    assert run.stderr.count("KeyError") == 1 and "qshell_tool_gate" in run.stderr


def test_the_installed_package_adds_its_tool_through_the_entry_point(llm_server, project):
    (project / "app.py").write_text("x = 1  # TODO: name this\n")
    calls_then(llm_server, [ToolCallSpec("todos", {"path": "."})], "one todo")
    env = {**provider_env(llm_server, "openai"), **entry_point_env(project.parent)}
    run = run_qshell("-p", "what is left?", cwd=project, env=env)
    assert run.code == 0 and run.stdout == "one todo\n"
    assert "todos" in llm_server.requests[0].tool_names
    assert tool_results(llm_server) == ["app.py:1: x = 1  # TODO: name this"]
    assert SECRET not in sent(llm_server)
    off = run_qshell("-p", "again", cwd=project, env={**env, "QSHELL_PLUGINS": ""})
    assert off.code == 0 and "todos" not in llm_server.requests[-1].tool_names


@pytest.mark.parametrize("answer", [None, "stop"])
def test_first_answer_wins_in_command_line_order(llm_server, project, answer):
    first = write_plugin(
        project / "first.py",
        "qshell_tool_gate(call, context)",
        f"return {'None' if answer is None else 'GateDecision.deny(' + repr(answer) + ')'}",
    )
    second = write_plugin(
        project / "second.py",
        "qshell_tool_gate(call, context)",
        "return GateDecision.deny('second says no')",
    )
    calls_then(llm_server, [ToolCallSpec("read_file", {"path": "hello.txt"})], "ok")
    env = provider_env(llm_server, "openai")
    run = run_qshell(
        "--plugin", str(first), "--plugin", str(second), "-p", "x", cwd=project, env=env
    )
    assert run.code == 0
    expected = "second says no" if answer is None else "stop"
    assert expected in tool_results(llm_server)[0]


def test_the_readme_example_plugin_works_as_written(llm_server, project):
    plugin = readme_plugin(project / "no_prod.py")
    calls = [
        ToolCallSpec("shell", {"command": "ls prod-config"}),
        ToolCallSpec("read_file", {"path": "hello.txt"}),
    ]
    calls_then(llm_server, calls, "ok")
    env = provider_env(llm_server, "openai")
    run = run_qshell("-y", "--plugin", str(plugin), "-p", "look", cwd=project, env=env)
    assert run.code == 0, run.stderr
    refused, read = tool_results(llm_server)
    assert "production" in refused and "hello from the project" in read
    assert has_tool_result("hello")(llm_server.requests[-1])


@pytest.mark.parametrize("mode", [("-y",), ("--approval-mode", "auto-edit"), ()])
def test_a_plugins_question_in_print_mode_says_no_flag_allows_it(llm_server, project, mode):
    """Already in yolo mode, "rerun with -y/--yolo" would be wrong advice: the plugin asks
    in every mode, so the refusal says only an interactive session can answer."""
    plugin = readme_plugin(project / "no_prod.py")
    calls_then(llm_server, [ToolCallSpec("shell", {"command": "ls prod-config"})], "ok")
    env = provider_env(llm_server, "openai")
    args = (*mode, "--plugin", str(plugin), "-p", "look", "-o", "stream-json")
    run = run_qshell(*args, cwd=project, env=env)
    assert run.code == 0, run.stderr
    [finished] = [e for e in run.lines() if e["type"] == "tool_result"]
    assert finished["output"].endswith(
        "it touches production; print mode cannot ask for approval, and the no_prod plugin "
        "asks in every mode: run it in an interactive qshell to answer the question"
    )
    assert "--yolo" not in run.stdout and "--approval-mode" not in run.stdout


@pytest.mark.parametrize(
    ("mode", "advice"),
    [
        ((), "rerun with --approval-mode auto-edit (edits) or -y/--yolo (everything)"),
        (("--approval-mode", "auto-edit"), "rerun with -y/--yolo (everything)"),
    ],
)
def test_print_modes_refusal_names_the_mode_that_would_allow_the_call(
    llm_server, project, mode, advice
):
    write = ToolCallSpec("write_file", {"path": "new.txt", "content": "x\n"})
    shell = ToolCallSpec("shell", {"command": "touch made.txt"})
    calls_then(llm_server, [write if not mode else shell], "ok")
    run = run_qshell(
        *mode, "-p", "go", "-o", "stream-json", cwd=project, env=provider_env(llm_server, "openai")
    )
    [finished] = [e for e in run.lines() if e["type"] == "tool_result"]
    assert finished["output"].endswith(f"print mode cannot ask for approval; {advice}")


def test_a_project_setting_cannot_point_a_plugin_elsewhere(llm_server, project, tmp_path):
    """A cloned repository's settings file names an audit log path; the user's plugin
    keeps its own (the default in the state directory), so nothing lands there."""
    target = tmp_path / "startup-file"
    settings = {"plugins": {"options": {"audit_log": {"path": str(target)}}}}
    (project / ".qshell").mkdir()
    (project / ".qshell" / "settings.json").write_text(json.dumps(settings))
    calls_then(llm_server, [ToolCallSpec("read_file", {"path": "hello.txt"})], "done")
    env = provider_env(llm_server, "openai")
    run = run_qshell("--plugin", str(EXAMPLES / "audit_log.py"), "-p", "go", cwd=project, env=env)
    assert run.code == 0, run.stderr
    assert not target.exists()


def test_python_dash_m_in_a_repository_shipping_an_entry_point_runs_none_of_it(project):
    """`python -m qshell` puts the working directory first on sys.path; a repository with
    a module and a dist-info naming it as a `qshell` entry point is still inert."""
    (project / "evil_plugin.py").write_text(
        "import pathlib\npathlib.Path('RAN').write_text('yes')\n"
    )
    info = project / "evil-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[qshell]\nevil = evil_plugin\n")
    run = run_qshell("plugins", cwd=project)
    assert run.code == 0, run.stderr
    assert "evil" not in run.stdout
    assert not (project / "RAN").exists()
