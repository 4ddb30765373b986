"""The one gate consultation (permissions/plugin_gate.py), through both runners that ask it: a
plugin tightens anything; each fixed limit on loosening holds whatever it says."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import BaseModel

from qshell.config import ApprovalMode, SandboxMode
from qshell.followup.gate import Boundary, BoundaryType, SpeculativeRunner
from qshell.overlay import Overlay
from qshell.permissions.confine import confinement
from qshell.permissions.plugin_gate import QSHELL
from qshell.permissions.policy import Verdict, shell_concern
from qshell.permissions.runner import MainToolRunner
from qshell.plugins import GateDecision, hookimpl
from qshell.sandbox import probe
from qshell.telemetry import Telemetry, read_events
from qshell.tools.base import Kind, ToolContext
from qshell.tools.edit import EditTool
from qshell.tools.paths import PathResolver
from qshell.tools.read_file import ReadFileArgs, ReadFileTool
from qshell.tools.shell import ShellTool
from qshell.tools.web_fetch import WebFetchTool
from qshell.tools.write_file import WriteFileTool
from tests.plugins.helpers import Gate, host_of

DEFAULT, AUTO, PLAN, YOLO = (
    ApprovalMode.DEFAULT,
    ApprovalMode.AUTO_EDIT,
    ApprovalMode.PLAN,
    ApprovalMode.YOLO,
)
ALLOW = GateDecision.allow("the plugin trusts it")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "hello.txt").write_text("hello\n")
    (project / ".env").write_text("KEY=1\n")
    return project


def context(root: Path, plugin: object, **fields: object) -> ToolContext:
    home = root.parent / "home"
    home.mkdir(exist_ok=True)
    ctx = ToolContext(paths=PathResolver(root, home=home), plugins=host_of(("p", plugin)))
    return replace(ctx, **fields)  # type: ignore[arg-type]


def main(mode: ApprovalMode, tool, args: dict, ctx: ToolContext, *, interactive=True):
    runner = MainToolRunner(mode, interactive=interactive)
    return runner, runner.decide(tool, tool.Args.model_validate(args), ctx)


SHELL = ShellTool()
WRITE = WriteFileTool()
READ = ReadFileTool()


# -- the main loop -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [DEFAULT, AUTO, YOLO])
def test_a_plugin_deny_holds_in_every_mode_even_yolo(root, mode):
    ctx = context(root, Gate(GateDecision.deny("not today")))
    _, decision = main(mode, READ, {"path": "hello.txt"}, ctx)
    assert (decision.verdict, decision.reason) == (Verdict.DENY, "not today")


def test_a_plugin_ask_asks_even_in_yolo_and_print_mode_refuses_it(root):
    ctx = context(root, Gate(GateDecision.ask("are you sure?")))
    _, asked = main(YOLO, READ, {"path": "hello.txt"}, ctx)
    assert (asked.verdict, asked.reason) == (Verdict.ASK, "are you sure?")
    _, printed = main(YOLO, READ, {"path": "hello.txt"}, ctx, interactive=False)
    assert printed.verdict is Verdict.DENY and printed.reason.startswith("are you sure?; print")


def test_a_boundary_answer_in_the_main_loop_asks(root):
    ctx = context(root, Gate(GateDecision.boundary("")))
    _, decision = main(YOLO, READ, {"path": "hello.txt"}, ctx)
    assert decision.verdict is Verdict.ASK and "the p plugin says boundary" in decision.reason


def test_a_plugin_allow_answers_a_question_qshell_would_ask(root):
    ctx = context(root, Gate(ALLOW))
    _, edit = main(DEFAULT, WRITE, {"path": "new.txt", "content": "x"}, ctx)
    _, fetch = main(AUTO, WebFetchTool(), {"url": "https://example.com"}, ctx)
    assert edit.verdict is Verdict.ALLOW and fetch.verdict is Verdict.ALLOW
    _, printed = main(DEFAULT, SHELL, {"command": "touch made.txt"}, ctx, interactive=False)
    assert printed.verdict is Verdict.ALLOW


@pytest.mark.parametrize("mode", [DEFAULT, AUTO])
def test_a_plugin_cannot_make_a_protected_path_writable_without_asking(root, mode):
    ctx = context(root, Gate(ALLOW))
    runner, decision = main(mode, WRITE, {"path": ".git/config", "content": "x"}, ctx)
    assert decision.verdict is Verdict.ASK and decision.always_asks
    runner.allow_always(WRITE)  # an "always" answer does not cover it either
    assert (
        runner.decide(WRITE, WRITE.Args(path=".git/hooks/pre-commit", content="x"), ctx).verdict
        is Verdict.ASK
    )
    _, printed = main(mode, WRITE, {"path": ".git/config", "content": "x"}, ctx, interactive=False)
    assert printed.verdict is Verdict.DENY


@pytest.mark.parametrize(
    "answer", [ALLOW, GateDecision.ask("let me ask"), GateDecision.boundary("x")]
)
def test_a_plugin_cannot_overturn_qshells_own_denials(root, answer):
    ctx = context(root, Gate(answer))
    _, outside = main(YOLO, WRITE, {"path": "../elsewhere.txt", "content": "x"}, ctx)
    _, planned = main(PLAN, WRITE, {"path": "new.txt", "content": "x"}, ctx)
    _, command = main(PLAN, SHELL, {"command": "touch made.txt"}, ctx)
    assert [d.verdict for d in (outside, planned, command)] == [Verdict.DENY] * 3
    assert "outside the project root" in outside.reason and "plan mode" in planned.reason


class Recorder:
    """A sandbox that records what it is asked to start, then starts it as is."""

    def __init__(self) -> None:
        self.started: list[tuple[list[str], dict[str, str]]] = []

    def wrap(
        self, argv: Sequence[str], environ: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        self.started.append((list(argv), dict(environ)))
        return list(argv), dict(environ)


def test_a_command_a_plugin_allows_runs_in_the_sandbox_like_a_proven_one(root, monkeypatch):
    sandbox = Recorder()
    environ = {**os.environ, "DEPLOY_TOKEN": "t0ps3cret"}
    ctx = context(root, Gate(ALLOW), sandbox=sandbox, environ=environ)
    runner, decision = main(DEFAULT, SHELL, {"command": "touch made.txt; echo $DEPLOY_TOKEN"}, ctx)
    assert decision.verdict is Verdict.ALLOW
    args = SHELL.Args(command="touch made.txt; echo $DEPLOY_TOKEN")
    result = runner.execute(SHELL, args, ctx)
    assert len(sandbox.started) == 1  # it went through the sandbox
    assert "DEPLOY_TOKEN" not in sandbox.started[0][1]  # with the sanitised environment
    assert "t0ps3cret" not in result.llm_content


def test_a_plugin_cannot_let_a_command_skip_a_required_sandbox_that_is_missing(root):
    missing = "sandbox.enabled: on, but bwrap is not installed"
    ctx = context(root, Gate(ALLOW), sandbox_missing=missing)
    _, decision = main(DEFAULT, SHELL, {"command": "touch made.txt"}, ctx)
    assert decision.verdict is Verdict.ASK and missing in decision.reason


def test_a_raising_plugin_denies_the_call_in_the_main_loop(root):
    ctx = context(root, Gate(raises=RuntimeError("bug")))
    _, decision = main(YOLO, READ, {"path": "hello.txt"}, ctx)
    assert decision.verdict is Verdict.DENY and "plugin p failed" in decision.reason


def test_the_plugin_sees_the_call_and_the_decision_qshell_would_make(root):
    gate = Gate(None)
    ctx = context(root, gate)
    main(DEFAULT, WRITE, {"path": "new.txt", "content": "x"}, ctx)
    main(AUTO, SHELL, {"command": "ls -la"}, ctx)
    (write, write_ctx), (shell, shell_ctx) = gate.seen
    assert (write.tool, write.kind, write.writes, write.paths) == (
        "write_file",
        "edit",
        (root / "new.txt",),
        (),
    )
    assert write.args == {"path": "new.txt", "content": "x"}
    assert (write_ctx.speculative, write_ctx.approval_mode, write_ctx.project_root) == (
        False,
        "default",
        root,
    )
    assert write_ctx.builtin == GateDecision.ask("edits need approval in default mode")
    assert (shell.command, shell_ctx.builtin.verdict) == ("ls -la", Verdict.ALLOW)  # proven


def test_each_decision_is_one_permission_record(root, tmp_path):
    telemetry = Telemetry.for_state_dir(tmp_path / "state")
    records: list[tuple[str, Mapping[str, object]]] = []
    telemetry.observe(lambda name, fields: records.append((name, fields)))
    ctx = replace(
        context(root, Gate(ALLOW)), plugins=host_of(("p", Gate(ALLOW)), telemetry=telemetry)
    )
    main(DEFAULT, WRITE, {"path": ".git/config", "content": "x"}, ctx)
    ((name, fields),) = records
    assert name == "permission"
    assert fields == {
        "tool": "write_file",
        "kind": "edit",
        "target": ".git/config",
        "path_count": 1,
        "speculative": False,
        "mode": "default",
        "builtin": "ask",
        "verdict": "ask",
        "reason": fields["reason"],
        "decided_by": QSHELL,
        "limited": "a plugin cannot make a protected path writable without asking",
    }
    # the file keeps the path and the reason (which names it) only under telemetry.logText
    assert telemetry.path is not None
    (written,) = read_events(telemetry.path)
    assert "target" not in written and "reason" not in written
    assert ".git" not in json.dumps(written) and written["path_count"] == 1


@pytest.mark.parametrize("log_text", [False, True])
def test_a_permission_record_keeps_the_command_line_only_under_log_text(root, tmp_path, log_text):
    telemetry = Telemetry.for_state_dir(tmp_path / "state", log_text=log_text)
    seen: list[Mapping[str, object]] = []
    telemetry.observe(lambda name, fields: seen.append(fields))
    ctx = replace(context(root, Gate(ALLOW)), plugins=host_of(telemetry=telemetry))
    command = "TOKEN=sk-live-0123 ./bin/deploy --key sk-live-0123 | tee out.log"
    main(DEFAULT, SHELL, {"command": command}, ctx)
    assert telemetry.path is not None
    (written,) = read_events(telemetry.path)
    assert (written["program"], written["arg_count"]) == ("deploy", 5)
    assert ("sk-live-0123" in json.dumps(written)) is log_text
    assert seen[0]["target"] == command  # a plugin observing the record sees it whole


# -- speculation ----------------------------------------------------------------------------


@pytest.fixture
def overlay(root: Path, tmp_path: Path):
    with Overlay.create(root, PathResolver(root), base_dir=tmp_path / "base") as made:
        yield made


def speculate(overlay, mode: ApprovalMode, tool, args: dict, ctx: ToolContext):
    runner = SpeculativeRunner(overlay, mode)
    parsed = tool.Args.model_validate(args)
    return runner, parsed, runner.decide(tool, parsed, ctx)


def boundary_of(overlay, mode, tool, args, ctx) -> Boundary:
    with pytest.raises(Boundary) as caught:
        speculate(overlay, mode, tool, args, ctx)
    return caught.value


def test_a_plugin_allow_cannot_make_a_speculative_edit_escape_the_overlay(root, overlay):
    ctx = context(root, Gate(ALLOW))
    edit = {"path": "hello.txt", "old_string": "hello", "new_string": "bye"}
    stopped = boundary_of(overlay, DEFAULT, EditTool(), edit, ctx)
    assert stopped.type is BoundaryType.EDIT  # default mode: no speculative edit at all
    runner, args, decision = speculate(overlay, AUTO, EditTool(), edit, ctx)
    assert decision.verdict is Verdict.ALLOW
    assert runner.execute(READ, ReadFileArgs(path="hello.txt"), ctx).error is None
    assert runner.execute(EditTool(), args, ctx).error is None
    assert (root / "hello.txt").read_text() == "hello\n"  # the project is untouched
    assert overlay.view.read_bytes(root / "hello.txt") == b"bye\n"


def test_a_plugin_allow_cannot_make_a_protected_path_writable_in_speculation(root, overlay):
    ctx = context(root, Gate(ALLOW))
    stopped = boundary_of(overlay, YOLO, WRITE, {"path": ".git/config", "content": "x"}, ctx)
    assert stopped.type is BoundaryType.EDIT and "protectedPaths" in stopped.detail


def test_a_plugin_allow_cannot_let_a_speculative_command_skip_the_proof_or_jail(root, overlay):
    ctx = context(root, Gate(ALLOW))  # no sandbox here: a command cannot run on an overlay
    stopped = boundary_of(overlay, YOLO, SHELL, {"command": "touch made.txt"}, ctx)
    assert stopped.type is BoundaryType.BASH and not (root / "made.txt").exists()


def test_a_plugin_allow_cannot_widen_a_speculations_read_scope(root, overlay):
    ctx = context(root, Gate(ALLOW))
    stopped = boundary_of(overlay, YOLO, READ, {"path": ".env"}, ctx)
    assert stopped.type is BoundaryType.READ_SCOPE


def test_a_plugin_allow_lifts_the_boundary_of_a_tool_that_writes_nothing(root, overlay):
    fetch, url = WebFetchTool(), {"url": "https://example.com"}
    assert boundary_of(overlay, YOLO, fetch, url, context(root, Gate(None))).type is (
        BoundaryType.DENIED_TOOL
    )
    _, _, decision = speculate(overlay, YOLO, fetch, url, context(root, Gate(ALLOW)))
    assert decision.verdict is Verdict.ALLOW


@pytest.mark.parametrize(
    "answer", [GateDecision.deny("no"), GateDecision.ask("hm"), GateDecision.boundary("stop")]
)
def test_every_other_plugin_answer_is_a_plugin_boundary_in_speculation(root, overlay, answer):
    ctx = context(root, Gate(answer))
    stopped = boundary_of(overlay, YOLO, READ, {"path": "hello.txt"}, ctx)
    assert (stopped.type, stopped.detail) == (BoundaryType.PLUGIN, answer.reason)


def test_a_raising_plugin_is_a_boundary_in_speculation(root, overlay):
    ctx = context(root, Gate(raises=OSError("disk")))
    stopped = boundary_of(overlay, AUTO, READ, {"path": "hello.txt"}, ctx)
    assert stopped.type is BoundaryType.PLUGIN and "plugin p failed" in stopped.detail
    assert ctx.plugins.take_notices() == ["plugin p failed in qshell_tool_gate: OSError: disk"]


def test_the_plugin_sees_a_speculative_call_with_its_boundary(root, overlay):
    gate = Gate(None)
    boundary_of(overlay, DEFAULT, WRITE, {"path": "new.txt", "content": "x"}, context(root, gate))
    ((call, seen),) = gate.seen
    assert call.writes == (root / "new.txt",)
    assert seen.speculative and seen.builtin.verdict is Verdict.BOUNDARY
    assert "would change new.txt" in seen.builtin.reason


def test_a_plugin_tool_is_a_boundary_unless_it_declares_the_paths_it_reads(root, overlay):
    from qshell.tools.registered import adapt
    from tests.tools.test_registered import Count

    ctx = context(root, Gate(None))
    silent = boundary_of(overlay, YOLO, adapt("p", Count(declares=False)), {}, ctx)
    assert silent.type is BoundaryType.DENIED_TOOL and "declares no paths" in silent.detail
    _, _, decision = speculate(overlay, YOLO, adapt("p", Count()), {"path": "."}, ctx)
    assert decision.verdict is Verdict.ALLOW


def test_a_declared_read_only_form_counts_only_where_the_sandbox_runs_it(root):
    """Without the jail a plugin's wrong declaration would write the real project (and
    from a speculation, before accept): then the declaration is not taken."""

    class Declares:
        @hookimpl
        def qshell_shell_readonly(self, command, argv):
            return command == "cloc"

    host = host_of(("declares", Declares()))
    paths = PathResolver(root, home=root.parent / "home")
    bare = ToolContext(paths=paths, plugins=host)
    assert shell_concern("cloc src", bare) is not None  # no sandbox: asked about
    assert shell_concern("cloc src", replace(bare, sandbox=Recorder())) is not None
    found = probe(None)
    if not found.jail:
        pytest.skip(f"no sandbox here: {found.reason}")
    launcher = confinement(SandboxMode.ON, paths, os.environ, None).launcher
    assert shell_concern("cloc src", replace(bare, sandbox=launcher)) is None


def test_a_plugin_allowing_its_own_command_tool_without_a_command_field_is_fine(root):
    """`confined` applies to the shell's command; a plugin tool of kind execute has
    other arguments, and its allowed call must not crash the decision."""

    class DeployArgs(BaseModel):
        target: str

    class Deploy:
        name = "deploy"
        kind = Kind.EXECUTE
        description = "deploys"
        Args = DeployArgs

        def accesses(self, args, ctx):
            return []

    ctx = context(root, Gate(ALLOW))
    runner = MainToolRunner(DEFAULT, interactive=True)
    decision = runner.decide(Deploy(), DeployArgs(target="staging"), ctx)  # type: ignore[arg-type]
    assert decision.verdict is Verdict.ALLOW
