"""Speculation of any command: a shell command that is not proven read-only runs in the
jail on a kernel overlay, changes nothing real before accept, and lands on accept.

Skipped with the probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qshell.agent.events import Notice, SpeculationAccepted, ToolFinished
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.acceptance import accept
from qshell.followup.overlay_run import IGNORED_PARTS, NOT_APPLIED
from qshell.followup.speculation import Speculation
from qshell.followup.states import Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.permissions.confine import JailLauncher
from qshell.permissions.runner import MainToolRunner
from qshell.sandbox import probe
from tests.agent.scripted import call
from tests.agent.test_conversation import Setup, make_conversation
from tests.followup.test_speculation_properties import Tree, tree
from tests.redaction.fakes import pem_block

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")


@dataclass
class Run:
    setup: Setup
    spec: Speculation
    overlay: Overlay
    commands: tuple[str, ...] = ()  # what the Acceptance said ran on the kernel overlay

    @property
    def root(self) -> Path:
        return self.setup.root

    def accept(self) -> list[object]:
        runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
        session = self.setup.conversation.session
        acceptance = accept(self.spec, session, runner, CancelToken())
        self.commands = acceptance.commands
        return list(acceptance.events)


def project(base: Path, files: dict[str, str]) -> Setup:
    setup = make_conversation(base)
    for rel, text in files.items():
        (setup.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (setup.root / rel).write_text(text)
    return setup


def speculate(setup: Setup, commands: list[str], mode: ApprovalMode = ApprovalMode.AUTO_EDIT):
    setup.conversation.set_approval_mode(mode)
    session = setup.conversation.session
    assert isinstance(session.tool_context.sandbox, JailLauncher)
    base = setup.root.parent / f"base-{secrets.token_hex(3)}"
    overlay = Overlay.create(setup.root, session.tool_context.paths, base_dir=base)
    for index, command in enumerate(commands):
        args = json.dumps({"command": command})
        setup.script(Message.assistant("", [call("shell", args, f"c{index}")]))
    setup.script(Message.assistant("all done"))
    spec = Speculation(session, "do it", overlay)
    spec.run()
    return Run(setup, spec, overlay)


def outputs(run: Run) -> list[str]:
    return [e.result.llm_content for e in run.spec.events if isinstance(e, ToolFinished)]


def test_a_command_that_writes_deletes_and_creates_lands_only_on_accept(tmp_path):
    setup = project(tmp_path, {"a.txt": "alpha\n", "src/b.py": "b\n", "keep.txt": "k\n"})
    before = tree(setup.root)
    run = speculate(setup, ["rm a.txt && echo x >> src/b.py && mkdir -p d/e && echo f > d/e/f"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert tree(setup.root) == before
    assert run.spec.runner.overlay_commands == [
        "rm a.txt && echo x >> src/b.py && mkdir -p d/e && echo f > d/e/f"
    ]
    events = run.accept()
    accepted = [e for e in events if isinstance(e, SpeculationAccepted)]
    assert accepted and "a.txt" in accepted[0].files
    assert run.commands == tuple(run.spec.runner.overlay_commands)
    assert not (setup.root / "a.txt").exists()
    assert (setup.root / "src/b.py").read_text() == "b\nx\n"
    assert (setup.root / "d/e/f").read_text() == "f\n"
    assert (setup.root / "keep.txt").read_text() == "k\n"


def test_a_later_call_sees_what_an_earlier_command_wrote(tmp_path):
    setup = project(tmp_path, {"a.txt": "alpha\n"})
    run = speculate(setup, ["echo beta >> a.txt", "cat a.txt", "rm a.txt", "ls"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    shown = outputs(run)
    assert "alpha\nbeta" in shown[1]
    assert "a.txt" not in shown[3]
    assert (setup.root / "a.txt").read_text() == "alpha\n"


def test_a_temporary_file_in_tmp_stands_and_changes_nothing_real(tmp_path):
    """A new file directly in /tmp is a temporary file (outside.py): the command stands,
    and neither it nor its accept writes the real /tmp."""
    setup = project(tmp_path, {"a.txt": "a\n"})
    name = f"qshell-test-{secrets.token_hex(4)}"
    run = speculate(setup, [f"echo t > /tmp/{name} && cat /tmp/{name} > copied.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    run.accept()
    assert not Path("/tmp", name).exists()
    assert (setup.root / "copied.txt").read_text() == "t\n"


@pytest.mark.parametrize("where", ["~/{name}", "/etc/{name}"])
def test_a_write_to_the_home_or_etc_stops_the_speculation_and_changes_nothing_real(tmp_path, where):
    """The home is seen as the command left it (a boundary: live, the file stays); /etc is
    read-only in the jail, and the output saying so is a boundary too."""
    setup = project(tmp_path, {"a.txt": "a\n"})
    name = f"qshell-test-{secrets.token_hex(4)}"
    home = Path(setup.conversation.session.tool_context.paths.home)
    run = speculate(setup, [f"echo x > {where.format(name=name)}; echo done > a.txt"])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and "outside the project" in run.spec.boundary.detail
    assert not (home / name).exists() and not Path("/etc", name).exists()
    assert (setup.root / "a.txt").read_text() == "a\n"
    assert not run.spec.runner.overlay_commands  # nothing of it was taken in


@pytest.mark.parametrize(
    ("secret", "held", "command"),
    [
        (".env", "TOKEN=SECRET-42\n", "grep -r TOKEN . > found.txt; true"),
        # a key under a name that tells nothing: a secret for what it holds, a stand-in too,
        # whatever the command makes of it (`tail -n +2` strips the header the scanner knows)
        ("backup_key.txt", pem_block() + "\n", "tail -n +2 backup_key.txt | tee found.txt"),
    ],
)
def test_a_masked_secret_read_by_a_speculated_command_stops_it_unread(
    tmp_path, secret, held, command
):
    """A speculated command that writes runs unjailed live, so its read of a masked secret
    (a stand-in in the jail) is a boundary; nothing of the secret reaches the overlay."""
    setup = project(tmp_path, {secret: held, "a.txt": "a\n"})
    run = speculate(setup, [command])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and secret in run.spec.boundary.detail
    assert not run.spec.runner.overlay_commands
    assert not (setup.root / "found.txt").exists()


def test_a_command_that_needs_the_network_is_a_boundary_without_running(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["pip install requests && echo done > a.txt"])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and "pip install" in run.spec.boundary.detail
    assert run.spec.runner.overlay_commands == []


def test_no_network_inside_and_a_network_failure_is_a_boundary(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    probe_net = "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""
    run = speculate(setup, [f"{probe_net} > out.txt 2>&1; cat out.txt"])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and "network failure" in run.spec.boundary.detail
    assert not (setup.root / "out.txt").exists()


IGNORED_BUILD = (
    "mkdir -p build __pycache__ && echo o > build/out.o && echo c > __pycache__/m.pyc"
    " && echo l > run.log && echo kept > kept.txt && echo built"
)


def ignoring_project(base: Path, *, apply_ignored: bool = True) -> Setup:
    setup = project(base, {".gitignore": "build/\n*.log\n", "a.txt": "a\n"})
    subprocess.run(["git", "init", "-q"], cwd=setup.root, check=True)
    if not apply_ignored:
        session = setup.conversation.session
        launcher = session.tool_context.sandbox
        assert isinstance(launcher, JailLauncher) and launcher.commands is not None
        commands = launcher.commands.model_copy(update={"apply_ignored": False})
        jail = replace(launcher, commands=commands)
        session.tool_context = replace(session.tool_context, sandbox=jail, launcher=jail)
    return setup


def test_files_the_project_ignores_are_applied_as_a_real_run_leaves_them(tmp_path):
    setup = ignoring_project(tmp_path)
    run = speculate(setup, [IGNORED_BUILD])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert "not applied" not in outputs(run)[0]
    run.accept()
    assert (setup.root / "kept.txt").read_text() == "kept\n"
    assert (setup.root / "build/out.o").read_text() == "o\n"
    assert (setup.root / "__pycache__/m.pyc").read_text() == "c\n"
    assert (setup.root / "run.log").read_text() == "l\n"


def test_with_apply_ignored_off_the_result_names_what_is_not_applied(tmp_path):
    setup = ignoring_project(tmp_path, apply_ignored=False)
    run = speculate(setup, [IGNORED_BUILD])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    shown = outputs(run)[0]
    assert "built" in shown and NOT_APPLIED in shown
    for rel in ("build/out.o", "__pycache__/m.pyc", "run.log"):
        assert rel in shown, rel
    assert "kept.txt" not in shown.split(NOT_APPLIED)[1]
    run.accept()
    assert (setup.root / "kept.txt").read_text() == "kept\n"
    for rel in ("build", "__pycache__", "run.log"):
        assert not (setup.root / rel).exists(), rel


def test_a_symlink_made_by_a_command_is_a_boundary(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["ln -s /etc/passwd link"])
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and "symlink" in run.spec.boundary.detail


def test_a_conflict_still_blocks_the_apply(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n", "b.txt": "b\n"})
    run = speculate(setup, ["rm a.txt && echo c > c.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    (setup.root / "b.txt").write_text("the user's edit\n")  # read by the command (all is)
    before = tree(setup.root)
    setup.script(Message.assistant("ran it now"))  # a conflict runs the prompt normally
    events = run.accept()
    assert not any(isinstance(e, SpeculationAccepted) for e in events)
    assert any(isinstance(e, Notice) and "b.txt" in e.text for e in events)
    assert tree(setup.root) == before


# --- a differential test: sandboxed and accepted == run for real in a copy --------------

STEPS = [
    "echo one > f1",
    "echo two >> f1",
    "rm -f f1",
    "mkdir -p d/sub",
    "echo x > d/sub/x",
    "rm -rf d",
    "mv f1 f2 2>/dev/null; true",
    "cp -r d d2 2>/dev/null; true",
    "rm -f base.txt",
    "echo new > base.txt",
    "rm -rf dir && mkdir dir && echo y > dir/y",
    "rm -rf dir && echo file > dir",
    "echo z > dir/z 2>/dev/null; true",
    "chmod 600 base.txt 2>/dev/null; true",
    "touch empty",
    "mkdir -p emptydir",
]
START = {"base.txt": "base\n", "dir/old.txt": "old\n", "dir/deep/o.txt": "o\n"}


def run_for_real(root: Path, commands: list[str]) -> None:
    for command in commands:
        subprocess.run(["bash", "-c", command], cwd=root, check=False, capture_output=True)


def files(found: Tree) -> Tree:
    return {rel: (kind, mode, data) for rel, (kind, mode, data) in found.items() if kind != "dir"}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STEPS), min_size=1, max_size=5))
def test_random_command_sequences_change_nothing_until_accept_then_match_a_real_run(commands):
    with tempfile.TemporaryDirectory() as temp:
        setup = project(Path(temp), START)
        copy = Path(temp) / "copy"
        shutil.copytree(setup.root, copy, symlinks=True)
        before = tree(setup.root)
        run = speculate(setup, commands)
        assert run.spec.status is Status.COMPLETED, run.spec.boundary
        assert tree(setup.root) == before
        run.accept()
        run_for_real(copy, commands)
        real, expected = tree(setup.root), tree(copy)
        assert files(real) == files(expected)
        assert {r for r, v in real.items() if v[0] == "dir"} == {
            r for r, v in expected.items() if v[0] == "dir"
        }
        assert not any(".qshell-" in rel for rel in real)
        os.sync()


def test_what_a_command_whose_result_does_not_stand_changed_is_never_applied(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    write = json.dumps({"path": "a.txt", "content": "written\n"})
    setup.script(Message.assistant("", [call("read_file", json.dumps({"path": "a.txt"}), "r0")]))
    setup.script(Message.assistant("", [call("write_file", write, "w0")]))
    probe_net = "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""
    run = speculate(setup, [f"echo more >> a.txt; echo n > new.txt; {probe_net}"])
    assert run.spec.status is Status.BOUNDARY
    assert run.overlay.check_conflicts() == []
    assert run.overlay.view.read_bytes(setup.root / "a.txt") == b"written\n"
    setup.script(Message.assistant("stopped there"))  # the boundary call is asked (denied)
    events = run.accept()
    assert any(isinstance(e, SpeculationAccepted) for e in events)
    assert (setup.root / "a.txt").read_text() == "written\n"
    assert not (setup.root / "new.txt").exists()


@pytest.mark.parametrize("apply_ignored", [True, False])
def test_an_ignored_directory_a_command_replaced_is_replaced_unless_off(tmp_path, apply_ignored):
    setup = ignoring_project(tmp_path, apply_ignored=apply_ignored)
    (setup.root / "build").mkdir()
    (setup.root / "build/old.o").write_text("old\n")
    run = speculate(setup, ["rm -rf build && mkdir build && echo n > build/new.o && rm a.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert (NOT_APPLIED in outputs(run)[0]) is not apply_ignored
    run.accept()
    assert (setup.root / "build/old.o").exists() is not apply_ignored
    assert (setup.root / "build/new.o").exists() is apply_ignored
    assert not (setup.root / "a.txt").exists()


def test_running_the_tests_is_speculated_whole_and_leaves_its_caches_as_a_real_run(tmp_path):
    tests = "from app import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    setup = project(
        tmp_path, {"app.py": "def add(a, b):\n    return a + b\n", "test_app.py": tests}
    )
    before = tree(setup.root)
    run = speculate(setup, [f"{sys.executable} -m pytest -q"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert "1 passed" in outputs(run)[0]
    assert tree(setup.root) == before
    requests = len(setup.provider.requests)
    events = run.accept()
    assert len(setup.provider.requests) == requests  # the result is there: no new request
    assert any(isinstance(e, SpeculationAccepted) for e in events)
    after = tree(setup.root)
    assert {r: v for r, v in after.items() if not caches(r)} == before
    assert any(r.startswith(".pytest_cache/") for r in after)  # as a real run leaves it


def caches(rel: str) -> bool:
    return any(part in IGNORED_PARTS for part in rel.split("/"))


def test_a_command_finds_the_projects_own_tools_but_no_secret_variables(tmp_path):
    setup = project(tmp_path, {"bin/hello": "#!/bin/sh\necho hello from the project\n"})
    (setup.root / "bin/hello").chmod(0o755)
    session = setup.conversation.session
    path = f"{setup.root}/bin:/usr/bin:/bin"
    environ = {**session.tool_context.environ, "PATH": path, "DATABASE_URL": "pg://u:pw@h/db"}
    session.tool_context = replace(session.tool_context, environ=environ)
    run = speculate(setup, ["hello > out.txt; env >> out.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    shown = run.overlay.view.read_bytes(setup.root / "out.txt").decode()
    assert shown.startswith("hello from the project\n")
    assert "OPENAI_API_KEY" not in shown and "pg://" not in shown


def test_a_read_only_command_after_an_edit_sees_the_edit_instead_of_stopping(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    write = json.dumps({"path": "a.txt", "content": "edited\n"})
    setup.script(Message.assistant("", [call("read_file", json.dumps({"path": "a.txt"}), "r0")]))
    setup.script(Message.assistant("", [call("write_file", write, "w0")]))
    run = speculate(setup, ["cat a.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    assert outputs(run)[-1].startswith("edited")
    assert run.spec.runner.overlay_commands == ["cat a.txt"]


def test_a_write_through_a_symlink_out_of_the_project_changes_nothing_real(tmp_path):
    setup = project(tmp_path, {"a.txt": "a\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (setup.root / "out").symlink_to(outside)
    run = speculate(setup, ["echo x > out/planted; echo y >> a.txt; true"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    run.accept()
    assert list(outside.iterdir()) == []
    assert (setup.root / "a.txt").read_text() == "a\ny\n"


@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT])
@pytest.mark.parametrize("command", ["cat .env", "cat /etc/hostname", "cat ../outside.txt"])
def test_a_read_only_command_that_reads_out_of_scope_stops_instead_of_running_masked(
    tmp_path, mode, command
):
    """Run in the jail, a secret would read as empty and the answer would differ from the
    real run; what the main loop would ask about is the user's to give."""
    setup = project(tmp_path, {".env": "TOKEN=SECRET-42\n", "a.txt": "TOKEN here\n"})
    (setup.root.parent / "outside.txt").write_text("out\n")
    run = speculate(setup, [command], mode=mode)
    assert run.spec.status is Status.BOUNDARY
    assert run.spec.boundary is not None and run.spec.boundary.type == "read_scope"
    assert run.spec.runner.overlay_commands == []


@pytest.mark.parametrize("before", [[], ["echo more >> a.txt"]])
def test_a_recursive_read_beside_a_masked_secret_runs_as_it_runs_live(tmp_path, before):
    """The main loop runs `grep -rn TOKEN .` without asking, jailed, `.env` masked: so does a
    speculation, on the real tree or — after a command wrote — on the kernel overlay."""
    setup = project(tmp_path, {".env": "TOKEN=SECRET-42\n", "a.txt": "TOKEN here\n"})
    run = speculate(setup, [*before, "grep -rn TOKEN ."])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    shown = outputs(run)[-1]
    assert "a.txt:1:TOKEN here" in shown and ".env: Permission denied" in shown
    assert "SECRET-42" not in shown


def test_a_proven_read_of_a_key_under_another_name_runs_on_a_copy_without_it(tmp_path):
    """The main loop runs `tail -n +2 backup_key.txt` jailed, on the copy with the key a
    marker: so does a speculation, after a command wrote, on the kernel overlay."""
    setup = project(tmp_path, {"backup_key.txt": pem_block() + "\n", "a.txt": "a\n"})
    run = speculate(setup, ["echo more >> a.txt", "rev backup_key.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    shown = outputs(run)[-1]
    assert "[redacted: private-key #0]"[::-1] in shown
    assert not any(line[::-1] in shown for line in pem_block().splitlines()[1:-1])


def test_a_speculated_command_runs_on_spare_cpu_only(tmp_path):
    """Its processes run under the idle scheduling class (or at niceness 19): a typed turn
    never waits on a guess (tools/shell.py `yielding`)."""
    setup = project(tmp_path, {"a.txt": "a\n"})
    run = speculate(setup, ["awk '{print $41, $19}' /proc/self/stat > sched.txt"])
    assert run.spec.status is Status.COMPLETED, run.spec.boundary
    run.accept()
    assert (setup.root / "sched.txt").read_text() in ("5 0\n", "0 19\n")
