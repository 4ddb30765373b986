"""Accept against a real run: a speculated, accepted sequence of shell calls leaves the tree
exactly as running it live with bash would have, metadata included.

Hypothesis draws a small starting tree and a sequence of shell calls (differential.py). The
sequence runs LIVE with real bash in one copy of the tree, and SPECULATED in another: each
call through the product's path for a speculated command — `run_on_overlay` with the
session's JailLauncher on the real kernel overlay —, then `Overlay.apply()` as accept does.
The two trees are compared with entry types, bytes, file and directory modes, symlink
targets, xattrs and ACLs (of files and directories, a command's `setfattr` and `setfacl`
among the calls), hard-link structure and link counts, exactly: a change to a file with
other hard links stops the speculation, so the link structure must match too. A call whose
run is refused
(RunRefused, the boundary) ends the speculation there, as a boundary does: what came before
it is applied and must equal the live run of those calls; the real tree is the starting
tree until the apply. A reported conflict (ApplyConflict) leaves the real tree exactly as
it was. The second property adds a user edit to the speculated copy's real tree at a random
point — after the speculation took its base but before a call runs, or after a call — and
the outcome must be a conflict that kept the tree as the start plus the user's edit, or an
applied result equal both to the live run over the edited tree and to the edit made after
the live run (an edit that cannot interact). Examples: QSHELL_DIFF_EXAMPLES (default a
CI-sized number per property); derandomized, so CI is reproducible. Skipped with the
probe's reason where a user-namespace overlay cannot be mounted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import (
    HealthCheck,
    currently_in_test_context,
    event,
    example,
    given,
    note,
    settings,
)
from hypothesis import strategies as st

from qshell.followup.overlay_run import RunRefused, overlay_launcher, run_on_overlay
from qshell.overlay import ApplyConflict, Overlay
from qshell.permissions.confine import JailLauncher
from qshell.sandbox import probe
from qshell.tools.base import ToolContext, ToolResult
from qshell.tools.shell import ShellArgs, ShellTool
from tests.agent.test_conversation import make_conversation
from tests.followup.differential import (
    CALLS,
    Snapshot,
    Start,
    UserEdit,
    build,
    differences,
    expected_trees,
    live_prefix,
    snapshot,
    starts,
    user_edits,
)

FOUND = probe()
pytestmark = [
    pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox"),
    pytest.mark.skipif(
        live_prefix() is None, reason="root without setpriv: no live run as the jail"
    ),
]
EXAMPLES = int(os.environ.get("QSHELL_DIFF_EXAMPLES", "0")) or None
DIFFERENTIAL = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Rig:
    """One session's tool context and jail, reused by every example: its project root is
    the speculated copy, rebuilt for each example; `scratch` holds the live copies."""

    def __init__(self, ctx: ToolContext, launcher: JailLauncher, root: Path, scratch: Path):
        self.ctx, self.launcher, self.root, self.scratch = ctx, launcher, root, scratch

    def __repr__(self) -> str:
        return f"Rig({self.root})"

    def overlay(self) -> Overlay:
        return Overlay.create(self.root, self.ctx.paths, base_dir=self.scratch / "base")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    setup = make_conversation(tmp_path)
    ctx = setup.conversation.session.tool_context
    launcher = overlay_launcher(ctx)
    assert launcher is not None, "the session cannot speculate commands"
    (tmp_path / "scratch").mkdir()
    yield Rig(ctx, launcher, setup.root, tmp_path / "scratch")


class _EditFirst(ShellTool):
    """The shell tool, but the user's edit is made first: after the speculation took what
    it records before a command, before the command starts (`made` once it is)."""

    def __init__(self, edit: UserEdit, root: Path) -> None:
        self.edit, self.root, self.made = edit, root, False

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        self.edit.make(self.root)
        self.made = True
        return super().run(args, ctx)


@dataclass
class Speculated:
    """How a speculated sequence ended: the calls taken in, whether it was refused or met
    a conflict, and the real tree just before the apply."""

    ran: list[str]
    refused: str | None
    conflict: str | None
    before_apply: Snapshot


def speculate(rig: Rig, calls: list[str], edit: UserEdit | None) -> Speculated:
    """Run `calls` speculated (the user's `edit` made where it says), then apply."""
    overlay = rig.overlay()
    ran: list[str] = []
    refused = conflict = None
    pending = edit
    try:
        for index, command in enumerate(calls):
            tool = ShellTool()
            if pending is not None and pending.at == index and pending.before:
                tool = _EditFirst(pending, rig.root)
            try:
                run_on_overlay(tool, ShellArgs(command=command), rig.ctx, overlay, rig.launcher)
            except RunRefused as exc:
                refused = f"{command}: {exc}"
                break
            finally:
                if isinstance(tool, _EditFirst) and tool.made:
                    pending = None
            ran.append(command)
            if pending is not None and pending.at == index:
                pending.make(rig.root)
                pending = None
        if pending is not None:
            pending.make(rig.root)
        before_apply = snapshot(rig.root)
        try:
            overlay.apply()
        except ApplyConflict as exc:
            conflict = str(exc)
    finally:
        overlay.discard()
    return Speculated(ran, refused, conflict, before_apply)


def _note(text: str) -> None:
    if currently_in_test_context():  # `check` serves plain tests too (test_accept_attrs.py)
        note(text)


def _event(text: str) -> None:
    if currently_in_test_context():
        event(text)


def check(rig: Rig, start: Start, calls: list[str], edit: UserEdit | None) -> None:
    build(rig.root, start)
    outcome = speculate(rig, calls, edit)
    _note(f"taken in: {outcome.ran}; refused: {outcome.refused}; conflict: {outcome.conflict}")
    expected = expected_trees(rig.scratch, start, outcome.ran, edit)
    untouched = expected.start if expected.edited is None else expected.edited
    leaked = differences(untouched, outcome.before_apply)
    assert not leaked, "the real tree changed before the apply:\n" + "\n".join(leaked)
    found = snapshot(rig.root)
    if outcome.conflict is not None:
        _event("a conflict")
        kept = differences(untouched, found)
        assert not kept, f"a conflict ({outcome.conflict}) still changed:\n" + "\n".join(kept)
        return
    _event("refused" if outcome.refused else "applied whole")
    what = "refused then applied" if outcome.refused else "applied"
    if expected.between is not None and not differences(expected.between, found):
        _event("the edit between calls seen by the later ones")
        return
    for name, want in expected.applied.items():
        wrong = differences(want, found)
        assert not wrong, f"{what}, it differs from {name}:\n" + "\n".join(wrong)


def _files(*files: tuple[str, bytes, int]) -> tuple[tuple[str, bytes, int], ...]:
    return files


LINKED = Start(_files(("a", b"a", 0o644), ("b", b"b", 0o644)), hard_link=True)  # a = hard-a


# each a class of difference found on the code this test was written against (shrunk)
@pytest.mark.timeout(900)  # a few hundred real sandboxed runs
@settings(DIFFERENTIAL, max_examples=EXAMPLES or 150)
@example(Start(_files(("a", b"a", 0o644)), hard_link=True), ["touch a"])
@example(Start(_files(), outside=True), ["printf %s a > pkg/shared"])
@example(Start(_files(("b", b"b", 0o644)), xattrs=("b",)), ["printf %s a >> b"])
@example(Start(_files(("b", b"b", 0o644)), xattrs=("b",)), ["chmod 600 b"])
@example(Start(_files(("pkg/m", b"m", 0o644))), ["chmod 700 pkg"])
@example(Start(_files()), ["mkdir n; chmod 700 n"])
@example(Start(_files(("pkg/.husky/pre-commit", b"x", 0o644))), ["chmod 700 pkg/.husky"])
@example(Start(_files(("x.log", b"a", 0o644)), git=True), ["rm -f x.log"])
@example(Start(_files(), git=True), ["mkdir -p build && printf %s a > build/p"])
@example(Start(_files()), ["touch a", "chmod 700 a"])  # a later call's chmod of a new file
@example(Start(_files(("b", b"b", 0o644))), ["ln b a"])  # a link the command made
@example(Start(_files()), ["printf %s a > n; ln n b"])  # of a file the command made
@example(Start(_files(("b", b"b", 0o644))), ["ln b a; printf %s ab >> a"])  # then edited
@example(Start(_files(("b", b"b", 0o644))), ["ln b a", "printf %s ab >> a"])  # by a later call
@example(Start(_files(("b", b"b", 0o644))), ["ln b a", "mv a n"])
@example(Start(_files(("a", b"a", 0o644)), hard_link=True), ["ln a n"])  # a file with links
@example(Start(_files(), outside=True), ["ln pkg/shared n"])  # one linked outside the tree
@example(LINKED, ["printf %s b >> a; cp hard-a n"])  # the other name read after an edit
@example(LINKED, ["printf %s b >> a", "cp hard-a n"])  # by a later call
@example(LINKED, ["chmod 700 hard-a; cp a n"])  # a chmod through one name
@example(LINKED, ["sed -i s/a/Z/ hard-a", "cp a n"])  # a replacement (the link broken live)
@example(LINKED, ["mv b a"])  # a rename over one name
@given(start=starts(), calls=CALLS)
def test_an_accepted_speculated_sequence_leaves_the_tree_a_live_run_leaves(
    rig: Rig, start: Start, calls: list[str]
) -> None:
    check(rig, start, calls, None)


@pytest.mark.timeout(900)
@settings(DIFFERENTIAL, max_examples=EXAMPLES or 80)
@example(Start(_files()), (["rm -f a", "printf %s a > a"], UserEdit("write", "a", 0, False)))
@example(Start(_files(("d/c", b"c", 0o644))), (["rm -rf d"], UserEdit("write", "d/n", 0, True)))
@example(Start(_files()), (["cp b c"], UserEdit("write", "b", 0, False)))
@example(
    Start(_files(), symlinks=("pkg/lm",)), (["rm -f pkg/lm"], UserEdit("chmod", "pkg", 0, False))
)
@example(Start(_files()), (["true", "rm -f a"], UserEdit("write", "a", 0, False)))
@given(start=starts(), run=CALLS.flatmap(lambda c: st.tuples(st.just(c), user_edits(len(c)))))
def test_a_user_edit_during_a_speculation_is_kept_whole_or_commutes_with_the_run(
    rig: Rig, start: Start, run: tuple[list[str], UserEdit]
) -> None:
    check(rig, start, *run)
