"""Protected paths: writes to qshell's, git's and other tools' configuration always ask,
are a boundary in speculation and are never applied by an accept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, load_settings
from qshell.followup.acceptance import accept
from qshell.followup.gate import BoundaryType
from qshell.followup.speculation import Speculation
from qshell.followup.states import SpeculationOutcome, Status
from qshell.llm.messages import Message
from qshell.overlay import Overlay
from qshell.permissions.policy import Verdict, decide
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import Access, Kind, ToolContext
from qshell.tools.paths import PathResolver
from qshell.tools.write_file import WriteFileTool
from tests.agent.scripted import call
from tests.e2e.helpers import provider_env, run_qshell
from tests.fakes.llm_server import Reply, ToolCallSpec, always, has_tool_result
from tests.followup.helpers import answered_conversation

PROTECTED = [
    ".qshell/settings.json",
    ".git/config",
    ".git/hooks/pre-commit",
    ".envrc",
    ".vscode/tasks.json",
]


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(paths=PathResolver(tmp_path / "proj", home=tmp_path / "home"))


@pytest.mark.parametrize("rel", PROTECTED)
@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT])
def test_writing_a_protected_path_asks_even_in_auto_edit(ctx, rel, mode):
    decision = decide(mode, Kind.EDIT, [Access(ctx.paths.resolve(rel), write=True)], ctx)
    assert decision.verdict is Verdict.ASK and "protectedPaths" in decision.reason


def test_an_ordinary_file_is_written_in_auto_edit_and_yolo_writes_anything(ctx):
    ordinary = [Access(ctx.paths.resolve("src/app.py"), write=True)]
    assert decide(ApprovalMode.AUTO_EDIT, Kind.EDIT, ordinary, ctx).verdict is Verdict.ALLOW
    git = [Access(ctx.paths.resolve(".git/config"), write=True)]
    assert decide(ApprovalMode.YOLO, Kind.EDIT, git, ctx).verdict is Verdict.ALLOW


def test_always_allowing_a_tool_does_not_cover_protected_paths(ctx):
    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=True)
    tool = WriteFileTool()
    runner.allow_always(tool)
    args = tool.Args(path=".git/hooks/post-checkout", content="#!/bin/sh\n")
    assert runner.decide(tool, args, ctx).verdict is Verdict.ASK
    plain = tool.Args(path="notes.txt", content="x")
    assert runner.decide(tool, plain, ctx).verdict is Verdict.ALLOW


def test_the_list_is_a_setting_the_user_replaces_and_a_project_only_extends(tmp_path):
    root = tmp_path / "proj"
    (root / ".qshell").mkdir(parents=True)
    (root / ".qshell" / "settings.json").write_text(json.dumps({"protectedPaths": ["deploy/"]}))
    environ = {"QSHELL_HOME": str(tmp_path / "q")}
    settings = load_settings(project_root=root, environ=environ)
    paths = PathResolver(root, protected_patterns=settings.protected_paths)
    assert paths.is_protected(root / "deploy" / "prod.yml")
    assert paths.is_protected(root / ".git" / "config")  # the project's list is added
    user = tmp_path / "q" / "config" / "settings.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"protectedPaths": ["secrets/"]}))
    settings = load_settings(project_root=root, environ=environ)
    paths = PathResolver(root, protected_patterns=settings.protected_paths)
    assert paths.is_protected(root / "secrets" / "a") and paths.is_protected(root / "deploy" / "b")
    assert not paths.is_protected(root / ".git" / "config")


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
    return setup


def test_a_speculative_write_to_a_protected_path_is_a_boundary(setup):
    args = json.dumps({"path": ".qshell/settings.json", "content": '{"approvalMode": "yolo"}'})
    setup.script(Message.assistant("", [call("write_file", args, "w1")]))
    session = setup.conversation.session
    spec = Speculation(
        session, "configure it", Overlay.create(session.project_root, session.tool_context.paths)
    )
    spec.run()
    assert spec.status is Status.BOUNDARY and spec.boundary is not None
    assert spec.boundary.type is BoundaryType.EDIT and "protectedPaths" in spec.boundary.detail
    assert spec.overlay.written == []
    spec.overlay.discard()


def test_an_accept_never_applies_a_protected_file_that_reached_the_overlay(setup):
    setup.script(Message.assistant("done"))
    session = setup.conversation.session
    overlay = Overlay.create(session.project_root, session.tool_context.paths)
    spec = Speculation(session, "do it", overlay)
    spec.run()
    overlay.view.write_bytes(session.project_root / ".git" / "config", b"[core]\nfsmonitor=x\n")
    setup.script(Message.assistant("ran normally"))
    runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
    acceptance = accept(spec, session, runner, CancelToken())
    assert acceptance.outcome is SpeculationOutcome.FAILED and "protected" in acceptance.detail
    list(acceptance.events)
    assert not (session.project_root / ".git" / "config").exists()


def test_print_mode_in_auto_edit_never_writes_the_project_settings(llm_server, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    write = ToolCallSpec(
        "write_file", {"path": ".qshell/settings.json", "content": '{"approvalMode": "yolo"}'}
    )
    llm_server.add_rule(has_tool_result(), Reply.text("I could not write it."))
    llm_server.add_rule(always(), Reply.tool_calls([write]))
    env = provider_env(llm_server, "openai")
    run = run_qshell("-p", "--approval-mode", "auto-edit", "make it yolo", cwd=project, env=env)
    assert run.code == 0 and "I could not write it." in run.stdout
    assert not (project / ".qshell" / "settings.json").exists()
    results = llm_server.requests[-1].last_tool_results
    assert results and "protectedPaths" in results[0].content
