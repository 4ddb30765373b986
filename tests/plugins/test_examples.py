"""The example plugins' policies form by form, loaded as a user loads them (`--plugin`);
tests/e2e/test_plugins_cli.py and test_plugins_repl.py run each through qshell itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qshell import shellproof
from qshell.plugins import (
    GateCall,
    GateContext,
    GateDecision,
    PluginRequest,
    SuggestionCheck,
    TelemetryEvent,
    Verdict,
    open_host,
)
from tests.plugins.helpers import EXAMPLES
from tests.secret_files import SECRET_FILES, plant


def example(name: str, root: Path, options: dict | None = None):
    request = PluginRequest(files=(EXAMPLES / f"{name}.py",), discover=False)
    environ = dict(os.environ)  # the tests' private QSHELL_HOME
    return open_host(request, environ=environ, cwd=root, options={name: options or {}})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / "deploy").mkdir(parents=True)
    (project / "deploy" / "prod.vault").write_text("token\n")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x = 1\n")
    return project


def gate(host, root: Path, **call: object) -> Verdict | None:
    return gate_in(host, GateContext(False, "yolo", root, GateDecision.allow()), **call)


def gate_in(host, context: GateContext, **call: object) -> Verdict | None:
    answer = host.tool_gate(GateCall(**call), context)  # type: ignore[arg-type]
    return None if answer is None else answer.decision.verdict


@pytest.mark.parametrize(
    ("call", "denied"),
    [
        ({"tool": "read_file", "kind": "read", "paths": ("deploy/prod.vault",)}, True),
        ({"tool": "read_file", "kind": "read", "paths": ("src/app.py",)}, False),
        ({"tool": "grep", "kind": "search", "paths": ("deploy",)}, True),
        ({"tool": "grep", "kind": "search", "paths": ("src",)}, False),
        ({"tool": "ls", "kind": "read", "paths": (".",)}, True),
        ({"tool": "write_file", "kind": "edit", "writes": ("x/new.VAULT",)}, True),
        ({"command": "cat deploy/prod.vault"}, True),
        ({"command": "cat ./deploy/../deploy/prod.vault"}, True),
        ({"command": "tool --config=deploy/prod.vault"}, True),
        ({"command": "grep -rn token"}, True),
        ({"command": "rg token src"}, True),
        ({"command": "git grep token"}, True),
        ({"command": "ls deploy"}, True),
        ({"command": "grep token src/app.py"}, False),
        ({"command": "cat src/app.py | wc -l"}, False),
        ({"command": "echo 'unbalanced"}, False),
    ],
)
def test_protect_secrets_denies_what_would_read_or_write_a_protected_file(root, call, denied):
    host = example("protect_secrets", root)
    fields = dict(call)
    for key in ("paths", "writes"):
        if key in fields:
            fields[key] = tuple(root / p for p in fields[key])
    if "command" in fields:
        fields.update(tool="shell", kind="execute")
    verdict = gate(host, root, **fields)
    assert verdict is (Verdict.DENY if denied else None)


@pytest.fixture
def dotenv(tmp_path: Path) -> Path:
    """A project holding qshell's own kind of secret, and none of the plugin's globs."""
    project = tmp_path / "app"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("x = 1\n")
    (project / ".env").write_text("API_KEY=1\n")
    (project / ".env.example").write_text("API_KEY=\n")
    return project


@pytest.mark.parametrize(
    ("call", "denied"),
    [
        ({"tool": "read_file", "kind": "read", "paths": (".env",)}, True),
        ({"tool": "write_file", "kind": "edit", "writes": ("config/server.pem",)}, True),
        ({"tool": "read_file", "kind": "read", "paths": (".env.example",)}, False),
        ({"tool": "grep", "kind": "search", "paths": (".",)}, False),  # qshell's grep skips it
        ({"tool": "ls", "kind": "read", "paths": (".",)}, False),  # a listing shows names
        ({"command": "cat .env"}, True),
        ({"command": "cat .e*"}, True),
        ({"command": "cat .en{v,x}"}, True),
        ({"command": "docker run --env-file=.env img"}, True),
        ({"command": "python3 -c \"print(open('.env').read())\""}, True),
        ({"command": "git show HEAD:.env"}, True),
        ({"command": "cat ~/.ssh/id_rsa"}, True),
        ({"command": "grep -rn API_KEY ."}, True),
        ({"command": "cat .env.example"}, False),
        ({"command": "ls -la"}, False),
        ({"command": "git status"}, False),
        ({"command": "grep API_KEY src/app.py"}, False),
    ],
)
def test_protect_secrets_covers_qshells_own_secret_names(dotenv, call, denied):
    host = example("protect_secrets", dotenv)
    fields = dict(call)
    for key in ("paths", "writes"):
        if key in fields:
            fields[key] = tuple(dotenv / p for p in fields[key])
    if "command" in fields:
        fields.update(tool="shell", kind="execute")
    assert gate(host, dotenv, **fields) is (Verdict.DENY if denied else None)


@pytest.mark.parametrize(
    ("speculative", "mode", "builtin", "denied"),
    [
        (False, "yolo", GateDecision.allow(), True),  # yolo runs it unconfined
        (False, "default", GateDecision.ask("a recursive read would reach .env"), True),
        (False, "default", GateDecision.allow(), False),  # proven: the jail masks .env
        (True, "yolo", GateDecision.allow(), False),  # a speculation runs it jailed
    ],
)
def test_a_recursive_search_reaching_dotenv_is_denied_unless_qshell_confines_it(
    dotenv, speculative, mode, builtin, denied
):
    host = example("protect_secrets", dotenv)
    context = GateContext(speculative, mode, dotenv, builtin)
    verdict = gate_in(host, context, tool="shell", kind="execute", command="grep -rn x .")
    assert verdict is (Verdict.DENY if denied else None)


def test_protect_secrets_holds_qshells_own_secret_names_too(root):
    """The plugin asks qshell's one list before its globs: each credential file, read by a
    file tool or a shell command, is denied (qshell's grep and glob skip them already)."""
    host = example("protect_secrets", root)
    for index, rel in enumerate(SECRET_FILES):
        case = root / f"case{index}"
        plant(case, (rel,))
        assert gate(host, root, tool="read_file", kind="read", paths=(case / rel,)), rel
        command = f"cat case{index}/{rel}"
        assert gate(host, root, tool="shell", kind="execute", command=command), rel


def test_protect_secrets_adds_the_globs_of_its_setting(root):
    (root / "keys.private").write_text("k\n")
    call = {"tool": "read_file", "kind": "read", "paths": (root / "keys.private",)}
    assert gate(example("protect_secrets", root), root, **call) is None
    host = example("protect_secrets", root, {"patterns": ["*.private"]})
    assert gate(host, root, **call) is Verdict.DENY
    bad = example("protect_secrets", root, {"patterns": "*.private"})
    assert "must be a list of globs" in bad.startup_notes[0]


@pytest.mark.parametrize(
    ("command", "read_only"),
    [
        ("cloc .", True),
        ("cloc --exclude-dir=node_modules src", True),
        ("cloc --out=report.txt .", False),
        ("cloc --report-file report.txt .", False),
        ("cloc --vcs=git", False),
        ("cloc . > report.txt", False),
        ("tokei", True),
        ("scc -o report.txt", False),
        ("shellcheck scripts/*.sh", False),  # a glob: only literal words are declared
        ("shellcheck run.sh", True),
        ("yq .name config.yaml", False),  # its expressions can load any file
        ("cloc --report_file=r.txt .", False),  # cloc's underscore spellings
        ("cloc --extract-with=sh .", False),  # runs a program
        ("scc -oreport.txt", False),
        ("scc -o=report.txt", False),
        ("tokei --files src", True),
        ("cargo --version", False),  # rustup runs the toolchain the project names
        ("git shortlog -sn", True),
        ("du -sh src", True),
        ("du -shL src", False),
        ("python3 --version", True),
        ("python3 script.py", False),
        ("cloc /etc", True),  # proven; the read scope then asks (outside the project)
    ],
)
def test_allow_readonly_extras_declares_these_forms_and_no_others(root, command, read_only):
    host = example("allow_readonly_extras", root)
    assert shellproof.check(command, extra=host.readonly_rule).read_only is read_only


@pytest.mark.parametrize(
    ("text", "rejected"),
    [
        ("push it", True),
        ("git push origin main", True),
        ("deploy to staging", True),
        ("publish the package", True),
        ("npm publish", True),
        ("twine upload dist/*", True),
        ("ship it", True),
        ("run the release script", True),
        ("run the tests", False),
        ("commit this", False),
        ("fix the pusher class", False),
    ],
)
def test_no_push_suggestions_rejects_what_leaves_the_machine(root, text, rejected):
    host = example("no_push_suggestions", root)
    reason = host.filter_suggestion(text, SuggestionCheck("", "default", root))
    assert (reason == "plugin:no_push_suggestions") is rejected


def test_audit_log_writes_to_the_state_directory_unless_told_otherwise(root, isolated_home):
    host = example("audit_log", root)
    host.event(TelemetryEvent("suggestion", {"outcome": "shown"}))  # not a decision
    host.event(TelemetryEvent("permission", {"tool": "ls", "verdict": "allow", "x": 1}))
    log = isolated_home / "qshell" / "state" / "audit.jsonl"
    (line,) = log.read_text().splitlines()
    record = json.loads(line)
    assert record["tool"] == "ls" and record["verdict"] == "allow" and "x" not in record
    assert isinstance(record["time"], float) and record["limited"] is None
