"""Accept never loses what the user did and never answers from a stale read, through the
REPL (pexpect, scripted server) in auto-edit and default mode: a file the user saves into
`out/` while a speculated `rm -rf out && …` runs (or after it finished) stays; a file the
user makes where the speculated command wrote one stays the user's; a speculated
`git log --oneline` is stale once the user commits, a speculated `cat link.txt` once the
user re-points the link. Each accept says "the prepared answer was not used: …; running it
now" and runs the prompt live, scripted apart from the speculated answer ("all tidy",
which never shows). What each guards: the base taken before a command and compared when
its changes are taken in (while it runs), a deletion's digest and a new file's absence at
apply (after it finished), git's HEAD, refs and index, a symlink's target. Skipped with the
probe's reason where a user-namespace overlay cannot be mounted."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from qshell.sandbox import probe
from tests.e2e.accepting import finished, speculating
from tests.e2e.pty import Term
from tests.e2e.test_speculation_repl import mains_for
from tests.fakes.llm_server import Reply, has_tool_result
from tests.waiting import wait_until

FOUND = probe()
pytestmark = pytest.mark.skipif(not FOUND.overlay, reason=FOUND.reason or "no overlay sandbox")
MODES = [
    pytest.param(("--approval-mode", "auto-edit"), id="auto-edit"),
    pytest.param((), id="default"),
]
WHEN = ["running", "finished"]  # the user acts while the command sleeps, or after it ended
NOT_USED = r"the prepared answer was not used: ([^\n]*); running it now"
SPECULATED = "all tidy"  # the speculated answer (speculating): a stale one never shows
MINE = "the user's own words\n"
LEFT = "left it as it is"
NAMELESS = ("changed", "appeared", "was deleted", "its ")  # a conflict's reason with no path
REBUILD = "rebuild the output"


def sleeping_below(pid: int) -> bool:
    """Whether a `sleep` runs among the descendants of process `pid`: the speculated command
    is past the steps before its sleep, and its base was taken."""
    parents: dict[int, int] = {}
    sleeps = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue  # gone meanwhile
        parents[int(entry.name)] = int(fields[1])
        if argv[0].endswith(b"sleep"):
            sleeps.append(int(entry.name))
    for found in sleeps:
        while found in parents and found != pid:
            found = parents[found]
        if found == pid:
            return True
    return False


def conflicted(
    llm_server,
    project: Path,
    command: str,
    mode: tuple[str, ...],
    when: str,
    act: Callable[[], object],
) -> str:
    """Speculate `command` (which sleeps before it says "done-it"); the user `act`s while it
    sleeps or once it finished; then Tab, Enter: accept reports a conflict and runs the
    prompt live, whose same command is asked about and denied. A change made while the
    command ran is found as it is taken in, so no question lists what cannot land; one made
    after it finished is found at apply, after the question a command on a kernel overlay
    asks in both modes, answered `apply`. Returns the conflict named."""
    child, answer, _ = speculating(llm_server, project, command, "done-it", *mode, prompt=REBUILD)
    llm_server.add_rule(has_tool_result("denied this tool call"), Reply.text(LEFT), first=True)
    if when == "running":
        assert wait_until(lambda: sleeping_below(child.child.pid), 60.0), "it never ran"
        act()
        assert sleeping_below(child.child.pid), "the command ended before the user acted"
    finished(llm_server, child, answer)
    if when == "finished":
        act()
    child.send("\t")
    child.submit("")
    if when == "finished":  # found at apply: the question comes first, as for any command
        child.expect("Use it")
        child.submit("a")
    child.expect(NOT_USED)  # found as the command was taken in: no question lists it
    assert when == "finished" or "Use it" not in child.text
    child.expect(r"Allow shell\?")  # the live turn asks, as in both modes
    child.send("n\r")
    child.expect(LEFT)
    return ended(child, llm_server, REBUILD)


def ended(child: Term, llm_server, prompt: str) -> str:
    """Leave qshell at its prompt; the conflicts the accept named. The speculated answer
    never showed and the prompt was asked twice: speculated, then live."""
    child.wait_prompt()
    child.send("\x04")
    assert child.finish() == 0
    text = child.text
    assert SPECULATED not in text, text
    assert len(mains_for(llm_server, prompt)) == 2
    found = re.search(NOT_USED, text)
    assert found is not None
    why = found.group(1)  # each conflict names its path, the project directory's too
    assert not any(c.startswith(NAMELESS) for c in why.split("; ")), why
    return why


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_file_saved_into_a_directory_the_speculation_replaced_stays(
    llm_server, project, mode, when
):
    (project / "out").mkdir()
    (project / "out/old.txt").write_text("old build\n")
    command = "rm -rf out && mkdir out && echo new > out/gen.txt && sleep 2 && echo done-it"
    why = conflicted(
        llm_server,
        project,
        command,
        mode,
        when,
        lambda: (project / "out/mine.txt").write_text(MINE),
    )
    assert re.match(r"out\b", why), why
    assert (project / "out/mine.txt").read_text() == MINE
    assert (project / "out/old.txt").read_text() == "old build\n"
    assert not (project / "out/gen.txt").exists()


@pytest.mark.parametrize("when", WHEN)
@pytest.mark.parametrize("mode", MODES)
def test_a_file_the_user_makes_where_the_speculation_wrote_one_stays_theirs(
    llm_server, project, mode, when
):
    command = "echo speculated > gen.txt && sleep 2 && echo done-it"
    why = conflicted(
        llm_server, project, command, mode, when, lambda: (project / "gen.txt").write_text(MINE)
    )
    assert why.startswith("gen.txt "), why
    assert (project / "gen.txt").read_text() == MINE


def git(project: Path, *args: str) -> str:
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=project, capture_output=True, text=True, check=True
    )
    return done.stdout


def accepted_live(child: Term, llm_server, prompt: str, answer: str) -> str:
    """Tab, Enter on a speculation gone stale: no question (its command is proven
    read-only), the conflict, then the live turn's `answer`; the conflict named."""
    child.send("\t")
    child.submit("")
    child.expect(NOT_USED)
    child.expect(answer)
    return ended(child, llm_server, prompt)


@pytest.mark.parametrize("mode", MODES)
def test_a_speculated_git_log_is_stale_once_the_user_commits(llm_server, project, mode):
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "hello.txt")
    git(project, "commit", "-q", "-m", "first commit")
    fresh = "the newest is the second commit"
    llm_server.add_rule(has_tool_result("second commit"), Reply.text(fresh))
    child, answer, _ = speculating(
        llm_server, project, "git log --oneline", "first commit", *mode, prompt="show the log"
    )
    finished(llm_server, child, answer)
    git(project, "commit", "-q", "--allow-empty", "-m", "second commit")
    why = accepted_live(child, llm_server, "show the log", fresh)
    assert why.startswith(".git/"), why  # HEAD, a ref or the index: the live answer saw it


@pytest.mark.parametrize("mode", MODES)
def test_a_speculated_read_through_a_symlink_is_stale_once_it_is_re_pointed(
    llm_server, project, mode
):
    (project / "a.txt").write_text("ay content\n")
    (project / "b.txt").write_text("bee content\n")
    (project / "link.txt").symlink_to("a.txt")
    fresh = "it says bee content"
    llm_server.add_rule(has_tool_result("bee content"), Reply.text(fresh))
    child, answer, _ = speculating(
        llm_server, project, "cat link.txt", "ay content", *mode, prompt="read the link"
    )
    finished(llm_server, child, answer)
    (project / "link.txt").unlink()
    (project / "link.txt").symlink_to("b.txt")
    why = accepted_live(child, llm_server, "read the link", fresh)
    assert why.startswith("link.txt "), why
