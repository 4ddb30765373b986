"""The approval matrix (mode × tool kind) and the read-scope rules."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from qshell.config import ApprovalMode
from qshell.permissions.policy import Verdict, decide
from qshell.permissions.runner import MainToolRunner
from qshell.tools.base import Access, Kind, Tool, ToolContext
from qshell.tools.paths import PathResolver

A, Q, D = Verdict.ALLOW, Verdict.ASK, Verdict.DENY
MODES = [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT, ApprovalMode.PLAN, ApprovalMode.YOLO]
# columns: default, auto-edit, plan, yolo
MATRIX = {
    Kind.READ: (A, A, A, A),
    Kind.SEARCH: (A, A, A, A),
    Kind.THINK: (A, A, A, A),
    Kind.EDIT: (Q, A, D, A),
    Kind.DELETE: (Q, A, D, A),
    Kind.MOVE: (Q, A, D, A),
    Kind.EXECUTE: (Q, Q, D, A),
    Kind.FETCH: (Q, Q, Q, A),
    Kind.OTHER: (Q, Q, Q, A),
}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    (tmp_path / "home").mkdir()
    return ToolContext(paths=PathResolver(tmp_path / "proj", home=tmp_path / "home"))


@pytest.mark.parametrize("kind", list(MATRIX))
@pytest.mark.parametrize("mode_index", range(4))
def test_the_approval_matrix_for_every_mode_and_kind(ctx, kind, mode_index):
    decision = decide(MODES[mode_index], kind, [], ctx)
    assert decision.verdict is MATRIX[kind][mode_index]
    if decision.verdict is not A:
        assert decision.reason


@pytest.mark.parametrize("mode", MODES)
def test_writes_outside_the_root_are_denied_in_every_mode(ctx, mode):
    outside = ctx.paths.resolve("../elsewhere.txt")
    decision = decide(mode, Kind.EDIT, [Access(outside, write=True)], ctx)
    assert decision.verdict is D and "outside" in decision.reason


@pytest.mark.parametrize("target", ["../notes.txt", ".env", "certs/server.pem", "~/.ssh/config"])
@pytest.mark.parametrize("mode", [ApprovalMode.DEFAULT, ApprovalMode.AUTO_EDIT, ApprovalMode.PLAN])
def test_reads_outside_the_root_or_of_secrets_need_approval(ctx, target, mode):
    decision = decide(mode, Kind.READ, [Access(ctx.paths.resolve(target))], ctx)
    assert decision.verdict is Q


@pytest.mark.parametrize("target", ["../notes.txt", ".env.local", "~/.aws/credentials"])
def test_yolo_allows_reads_anywhere(ctx, target):
    assert (
        decide(ApprovalMode.YOLO, Kind.READ, [Access(ctx.paths.resolve(target))], ctx).verdict is A
    )


def test_extra_secret_patterns_from_settings_extend_the_list(tmp_path):
    ctx = ToolContext(
        paths=PathResolver(tmp_path, home=tmp_path, extra_secret_patterns=["*.tfstate"])
    )
    path = ctx.paths.resolve("infra/prod.tfstate")
    assert decide(ApprovalMode.DEFAULT, Kind.READ, [Access(path)], ctx).verdict is Q


def test_a_symlink_inside_the_root_pointing_out_is_outside(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    ctx = ToolContext(paths=PathResolver(root, home=tmp_path / "home"))
    path = ctx.paths.resolve("link.txt")
    assert not ctx.paths.is_inside_root(path)
    assert decide(ApprovalMode.AUTO_EDIT, Kind.EDIT, [Access(path, write=True)], ctx).verdict is D


def test_print_mode_runner_turns_questions_into_denials_with_a_hint(ctx):
    class Shell:
        name = "shell"
        kind = Kind.EXECUTE

        def accesses(self, args, ctx):
            return []

    runner = MainToolRunner(ApprovalMode.DEFAULT, interactive=False)
    decision = runner.decide(cast(Tool, Shell()), None, ctx)
    assert decision.verdict is D and "-y" in decision.reason
