"""Random speculative tool sequences never touch the real tree until accept.

Each example builds a temporary project and a Conversation in auto-edit mode, scripts one
assistant message per tool call (read_file, write_file, edit, glob, grep, ls, and shell
commands that read or write) and a final text, and runs them as a Speculation. Whatever
the outcome (completed, or a boundary), the real tree — every file's bytes and every mode
— is byte-identical to the snapshot taken before, at every round and at the end. A
completed speculation is then accepted, a stopped one's overlay applied, and the tree
equals what the overlay's view showed. Commands are not speculated on a kernel overlay
here (`sandbox.speculateCommands` off): test_overlay_run.py covers that.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from qshell import shellproof
from qshell.agent.events import SpeculationAccepted, ToolFinished, TurnFinished
from qshell.agent.session import Session
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode
from qshell.followup.acceptance import accept
from qshell.followup.gate import BoundaryType
from qshell.followup.speculation import Speculation
from qshell.followup.states import Status
from qshell.llm.base import StreamDone, StreamEvent
from qshell.llm.messages import ChatRequest, Message, Usage
from qshell.overlay import Overlay
from qshell.permissions.confine import JailLauncher
from qshell.permissions.runner import MainToolRunner
from tests.agent.scripted import call
from tests.agent.test_conversation import make_conversation

EXISTING = {
    "a.txt": (b"alpha\nbeta\n", 0o644),
    "run.sh": (b"echo alpha\n", 0o755),
    "locked.txt": (b"beta beta\n", 0o444),
    "src/b.py": (b"beta = 1\n", 0o600),
    "src/pkg/c.py": (b"gamma\nalpha\n", 0o644),
}
NEW = ["new.txt", "src/new.py", "fresh/dir/d.txt"]
FILES = [*EXISTING, *NEW]
DIRS = [None, ".", "src", "src/pkg", "fresh"]
READ_ONLY_SHELL = [
    "cat a.txt",
    "ls",
    "ls -la src",
    "grep -rn beta .",
    "wc -c a.txt src/b.py",
    "head -n 1 src/pkg/c.py",
    "cat missing.txt",
]
WRITING_SHELL = [
    "rm a.txt",
    "echo x > a.txt",
    "echo x >> src/b.py",
    "touch new.txt",
    "sed -i s/alpha/omega/ a.txt",
    "mv a.txt z.txt",
    "cp a.txt copy.txt",
    "chmod 600 run.sh",
    "mkdir fresh",
    "tee new.txt < a.txt",
    "find . -name '*.py' -delete",
]
TEXT = st.text(alphabet="ab \n", max_size=30)  # never contains "Q": see MISS

COMMANDS = st.sampled_from(READ_ONLY_SHELL) | st.sampled_from(WRITING_SHELL)  # half each
edits = st.tuples(
    st.just("edit"),
    st.sampled_from(FILES),
    st.booleans(),  # True: a unique old_string cut from the file as the overlay shows it
    st.integers(0, 30),
    st.integers(0, 12),
    st.text(alphabet="abz\n", max_size=8),
)
ops = st.one_of(
    st.tuples(st.just("read_file"), st.sampled_from(FILES)),
    st.tuples(st.just("write_file"), st.sampled_from(FILES), TEXT),
    edits,
    edits,
    st.tuples(st.just("glob"), st.sampled_from(["**/*.py", "*.txt", "**/*"])),
    st.tuples(st.just("grep"), st.sampled_from(["alpha", "beta", "a+", "z"])),
    st.tuples(st.just("ls"), st.sampled_from(DIRS)),
    st.tuples(st.just("shell"), COMMANDS),
)

Tree = dict[str, tuple[str, int, bytes]]


def tree(root: Path) -> Tree:
    """Every path under `root`: its kind, mode and bytes (a symlink's target)."""
    out: Tree = {}
    for top, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(top) / name
            rel = path.relative_to(root).as_posix()
            info = os.lstat(path)
            mode = stat.S_IMODE(info.st_mode)
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", mode, os.readlink(path).encode())
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("dir", mode, b"")
            else:
                out[rel] = ("file", mode, path.read_bytes())
    return out


def view_files(overlay: Overlay, root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file the overlay's view shows (real tree plus written files): mode and bytes."""
    names = {rel for rel, (kind, _, _) in tree(root).items() if kind == "file"}
    names |= set(overlay.written)
    view = overlay.view
    return {
        rel: (stat.S_IMODE(view.stat(root / rel).st_mode), view.read_bytes(root / rel))
        for rel in sorted(names)
    }


def unique_slice(text: str, start: int, length: int) -> str:
    """A piece of `text` from `start` (wrapped), grown from `length` until it is unique."""
    if not text:
        return ""
    start %= len(text)
    for end in range(start + max(1, length), len(text) + 1):
        if text.count(text[start:end]) == 1:
            return text[start:end]
    return text[start:]


def arguments(op: tuple, overlay: Overlay, root: Path) -> dict[str, object]:
    """The tool's arguments, worked out when the model 'speaks' (an edit sees the view)."""
    name = op[0]
    if name in ("read_file", "write_file", "edit"):
        path = op[1]
        if name == "read_file":
            return {"path": path}
        if name == "write_file":
            return {"path": path, "content": op[2]}
        matching, start, length, new = op[2:]
        if matching:
            target = root / path
            shown = overlay.view.read_bytes(target) if overlay.view.is_file(target) else b""
            old = unique_slice(shown.decode("utf-8", "replace"), start, length)
        else:
            old = "Q" + new + "Q"  # never in any file: no match, no write
        return {"path": path, "old_string": old, "new_string": new}
    if name == "glob":
        return {"pattern": op[1]}
    if name == "grep":
        return {"pattern": op[1]}
    if name == "ls":
        return {} if op[1] is None else {"path": op[1]}
    return {"command": op[1]}


def step(
    index: int, op: tuple, overlay: Overlay, root: Path, seen: list[Tree]
) -> Callable[[ChatRequest, CancelToken], Iterator[StreamEvent]]:
    def stream(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        seen.append(tree(root))  # the real tree after every earlier call has run
        args = json.dumps(arguments(op, overlay, root))
        message = Message.assistant("", [call(op[0], args, f"c{index}")])
        yield StreamDone(message, Usage(prompt_tokens=10, completion_tokens=2), "tool_use")

    return stream


def final(root: Path, seen: list[Tree]) -> Callable[[ChatRequest, CancelToken], Iterator]:
    def stream(request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        seen.append(tree(root))
        message = Message.assistant("all done")
        yield StreamDone(message, Usage(prompt_tokens=10, completion_tokens=2), "end_turn")

    return stream


def without_command_speculation(session: Session) -> None:
    """The session as `sandbox.speculateCommands: false` makes it."""
    ctx = session.tool_context
    if isinstance(ctx.sandbox, JailLauncher):
        session.tool_context = replace(ctx, sandbox=replace(ctx.sandbox, commands=None))


@settings(max_examples=40)
@given(st.lists(ops, max_size=10))
def test_the_real_tree_is_byte_identical_until_accept_then_matches_the_view(sequence):
    with tempfile.TemporaryDirectory() as temp:
        setup = make_conversation(Path(temp))
        root = setup.root
        for rel, (data, mode) in EXISTING.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            os.chmod(root / rel, mode)
        setup.conversation.set_approval_mode(ApprovalMode.AUTO_EDIT)
        session = setup.conversation.session
        without_command_speculation(session)
        before = tree(root)
        overlay = Overlay.create(root, session.tool_context.paths, base_dir=Path(temp) / "base")
        seen: list[Tree] = []
        setup.script(*(step(i, op, overlay, root, seen) for i, op in enumerate(sequence)))
        setup.script(final(root, seen))

        spec = Speculation(session, "do it", overlay)
        spec.run()

        assert spec.status in (Status.COMPLETED, Status.BOUNDARY), spec.status
        assert seen
        for during in seen:
            assert during == before
        assert tree(root) == before
        ran = [e for e in spec.events if isinstance(e, ToolFinished)]
        if spec.status is Status.BOUNDARY:
            # in auto-edit mode only the shell stops a speculation in this project
            assert spec.boundary is not None and spec.boundary.type is BoundaryType.BASH
            kind, command = sequence[len(ran)][:2]
            assert kind == "shell"
            assert command in WRITING_SHELL or (
                overlay.has_writes and shellproof.check(command).read_only
            )
        else:
            assert len(ran) == len(sequence)
            assert not any(op[1] in WRITING_SHELL for op in sequence if op[0] == "shell")
        shown = view_files(overlay, root)
        event(f"status={spec.status}")
        event(f"overlay has writes={overlay.has_writes}")
        edited = [e for e in ran if e.name == "edit" and e.result.error is None]
        event(f"an edit went through={bool(edited)}")
        assert tree(root) == before  # reading the view wrote nothing either

        if spec.status is Status.COMPLETED:
            requests = len(setup.provider.requests)
            runner = MainToolRunner(ApprovalMode.AUTO_EDIT, interactive=False)
            events = list(accept(spec, session, runner, CancelToken()).events)
            assert len(setup.provider.requests) == requests  # nothing ran twice
            accepted = [e for e in events if isinstance(e, SpeculationAccepted)]
            assert len(accepted) == 1 and accepted[0].completed
            assert accepted[0].files == tuple(overlay.written)
            assert isinstance(events[-1], TurnFinished) and events[-1].text == "all done"
            assert not overlay.directory.exists()
        else:
            overlay.apply()
            overlay.discard()

        after = tree(root)
        files = {rel: (mode, data) for rel, (kind, mode, data) in after.items() if kind == "file"}
        assert files == shown
        for rel, (kind, mode, _) in before.items():
            assert after[rel][:2] == (kind, mode)  # nothing removed, no mode changed
