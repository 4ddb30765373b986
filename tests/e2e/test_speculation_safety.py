"""Speculation under attack, end to end: the REPL (pexpect) against the scripted server.

Each test scripts the model as an adversary would and checks what reached the server or
the disk: no secret byte, no lost user edit, nothing outside the project touched, and a
prompt that comes back at once when the user types over a slow speculation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qshell.followup.suggestion import SUGGESTION_MARKER
from qshell.sandbox import probe
from tests.e2e.pty import Term, spawn_qshell
from tests.e2e.test_speculation_repl import start
from tests.fakes.llm_server import (
    Reply,
    Rule,
    ToolCallSpec,
    always,
    has_tool_result,
    last_user_text_contains,
)
from tests.waiting import wait_until

SECRET = "sk-live-7f3a9c2e0b1d"
JAILED = probe(None).jail
SUGGESTED = "find where API_KEY is used"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\nkey = os.environ['API_KEY']\n")
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    os.symlink(".env", root / "settings.txt")
    (root / "hello.txt").write_text("hello world\n")
    return root


def suggest(server, text: str) -> None:
    server.add_rule(last_user_text_contains(SUGGESTION_MARKER), Reply.text(text))


def first_turn(server, child: Term) -> None:
    child.submit("read hello.txt")
    child.expect("it says hello")
    child.wait_prompt()


def sent(server) -> str:
    return "\n".join(request.raw.decode("utf-8", "replace") for request in server.requests)


def test_a_speculated_search_never_sends_a_byte_of_the_secret(llm_server, project):
    suggest(llm_server, SUGGESTED)
    shell = ToolCallSpec("shell", {"command": "grep -rn API_KEY ."})
    search = ToolCallSpec("grep", {"pattern": "API_KEY"})
    llm_server.add_rule(has_tool_result("src/app.py"), Reply.text("it is read in src/app.py"))
    llm_server.add_rule(last_user_text_contains(SUGGESTED), Reply.tool_calls([search, shell]))
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})])
    )
    child = start(llm_server, project)
    first_turn(llm_server, child)
    child.expect(SUGGESTED)
    child.send("\t")
    child.submit("")
    if JAILED:  # the shell call ran as it runs live: in the jail, `.env` (and the link
        child.expect("it is read in src/app.py")  # to it) masked, so nothing to ask
    else:  # no sandbox: the recursive read beside the secret asks, live and speculated
        child.expect("Allow shell")
        child.submit("n")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert SECRET not in sent(llm_server)


def speculated_until(server, rule_hits, hits: int, timeout_s: float = 20.0) -> None:
    """Wait until `rule_hits()` reaches `hits` and every request so far was answered."""
    answered = wait_until(
        lambda: rule_hits() >= hits and all(r.completed.is_set() for r in server.requests),
        timeout_s,
    )
    assert answered, "the speculation did not get that far"


def test_a_user_edit_between_a_speculative_read_and_write_makes_accept_a_conflict(
    llm_server, project
):
    (project / "notes.txt").write_text("some notes\n")
    suggest(llm_server, "fix the greeting")
    read = ToolCallSpec("read_file", {"path": "hello.txt"})
    write = ToolCallSpec("write_file", {"path": "hello.txt", "content": "howdy world\n"})
    llm_server.add_rule(has_tool_result("Updated hello.txt"), Reply.text("greeting fixed"))
    held = llm_server.add_rule(has_tool_result("hello world"), Reply.tool_calls([write]))
    hold = llm_server.hold(held)
    llm_server.add_rule(has_tool_result("greetings from me"), Reply.text("you changed it; left it"))
    llm_server.add_rule(last_user_text_contains("fix the greeting"), Reply.tool_calls([read]))
    llm_server.add_rule(has_tool_result("some notes"), Reply.text("it says notes"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "notes.txt"})])
    )
    child = start(llm_server, project, "--approval-mode", "auto-edit")
    child.submit("read notes.txt")
    child.expect("it says notes")
    child.wait_prompt()
    hold.wait_arrived(timeout=20)  # the speculation read hello.txt and is about to write it
    (project / "hello.txt").write_text("greetings from me\n")
    hold.release()
    speculated_until(llm_server, lambda: held.hits, 1)
    child.expect("fix the greeting")
    child.send("\t")
    child.submit("")
    child.expect("not used")
    child.expect("you changed it; left it")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert (project / "hello.txt").read_text() == "greetings from me\n"


def test_an_accept_never_overwrites_a_file_the_user_made_read_only(llm_server, project):
    locked = project / "locked.txt"
    locked.write_text("locked v1\n")
    locked.chmod(0o444)
    suggest(llm_server, "update locked.txt")
    write = ToolCallSpec("write_file", {"path": "locked.txt", "content": "changed\n"})
    llm_server.add_rule(has_tool_result("locked.txt"), Reply.text("updated it"))
    update = llm_server.add_rule(
        Rule(
            last_user_text_contains("update locked.txt"),
            replies=[Reply.tool_calls([write]), Reply.text("it is read-only; left it")],
        )
    )
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})])
    )
    child = start(llm_server, project, "--approval-mode", "auto-edit")
    first_turn(llm_server, child)
    speculated_until(llm_server, lambda: update.hits, 1)
    child.expect("update locked.txt")
    child.send("\t")
    child.submit("")
    child.expect("it is read-only; left it|updated it")
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    assert locked.read_text() == "locked v1\n"
    assert locked.stat().st_mode & 0o777 == 0o444


def test_with_the_temp_dir_inside_the_project_nothing_outside_is_ever_deleted(
    llm_server, project, tmp_path
):
    import hashlib

    from qshell.overlay.journal import write_journal
    from qshell.overlay.records import JournalState, Phase, Step
    from tests.overlay.test_overlay import DEAD_PID

    outside = tmp_path / "outside"
    outside.mkdir()
    keep = outside / "keep.txt"
    keep.write_text("keep me\n")
    temp = project / "tmp"
    forged = temp / f"qshell-speculation-{os.getuid()}" / str(DEAD_PID) / "overlay-forged"
    forged.mkdir(parents=True, mode=0o700)
    for directory in (forged, forged.parent, forged.parent.parent):
        directory.chmod(0o700)
    step = Step(
        rel="keep.txt",
        staged=".qshell-stage-0123456789abcdef",
        backup=None,
        mode=None,
        expect_sha256=None,
        sha256=hashlib.sha256(keep.read_bytes()).hexdigest(),
        staged_ino=keep.stat().st_ino,
    )
    # a journal planted by a write into the project's temp dir: its rollback would delete
    # the "new" file keep.txt in the directory it names as its root
    write_journal(forged / "journal.json", JournalState(str(outside), Phase.RENAMING, [], [step]))
    suggest(llm_server, "look at notes.txt")
    notes = ToolCallSpec("write_file", {"path": "notes.txt", "content": "notes\n"})
    llm_server.add_rule(has_tool_result("notes.txt"), Reply.text("wrote notes"))
    spec_rule = llm_server.add_rule(
        last_user_text_contains("look at notes.txt"), Reply.tool_calls([notes])
    )
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})])
    )
    env = {"QSHELL_SUGGESTIONS": "1", "QSHELL_SPECULATION": "1", "TMPDIR": str(temp)}
    child = spawn_qshell(llm_server, project, "--approval-mode", "auto-edit", extra_env=env)
    child.expect("for commands, Ctrl-D to exit")
    child.wait_prompt()
    first_turn(llm_server, child)
    speculated_until(llm_server, lambda: spec_rule.hits, 1)
    child.send("\x04")
    assert child.finish() == 0
    assert keep.read_text() == "keep me\n"
    overlays = [p for p in temp.rglob("overlay-*") if p != forged]
    assert overlays == []  # the speculation's overlay lived outside the project


def test_typing_during_a_slow_speculative_tool_returns_the_prompt(llm_server, project):
    os.mkfifo(project / "pipe")  # `cat pipe` blocks until somebody writes: forever, here
    suggest(llm_server, "show the pipe")
    cat = ToolCallSpec("shell", {"command": "cat pipe"})
    llm_server.add_rule(has_tool_result("pipe"), Reply.text("never"))
    slow = llm_server.add_rule(last_user_text_contains("show the pipe"), Reply.tool_calls([cat]))
    llm_server.add_rule(
        last_user_text_contains("something else"), Reply.text("done something else")
    )
    llm_server.add_rule(has_tool_result("hello world"), Reply.text("it says hello"))
    llm_server.add_rule(
        always(), Reply.tool_calls([ToolCallSpec("read_file", {"path": "hello.txt"})])
    )
    child = start(llm_server, project)
    first_turn(llm_server, child)
    speculated_until(llm_server, lambda: slow.hits, 1)
    assert wait_until(lambda: _cat_running(project), 20.0)  # the speculative `cat pipe` is running
    child.submit("something else")
    child.expect("done something else")
    child.wait_prompt()
    assert wait_until(lambda: not _cat_running(project), 20.0)  # the abort killed it
    child.send("\x04")
    assert child.finish() == 0
    assert "never" not in child.text


def _cat_running(project: Path) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if argv[:2] == [b"cat", b"pipe"] and cwd == str(project):
            return True
    return False
