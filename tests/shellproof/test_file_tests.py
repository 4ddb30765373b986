"""File tests are reads: every file `test`, `[` or `[[ … ]]` looks at is a read of the proof.

A file test (`-e -f -d -r -s -L …`, `-nt -ot -ef`) tells whether a file exists, its type,
owner, permissions or age, so its operand must be checked for scope like `cat`'s. Hypothesis
builds expressions — operators unary and binary, `!`, `-a`/`-o`, parentheses, `&&`/`||`,
string and number operators, patterns, and operands that bash expands (tildes) or does not
(`[[ -e F* ]]` tests the file named `F*`) — and real bash runs each one the proof accepts
under strace in a throwaway project with a HOME: every path below the project or HOME that
bash stats or tests for access must be one the proof reported, as bash expands it. Explicit
cases pin the other side: strings, numbers, patterns, `-t`'s descriptor and `-o`'s option
name are no reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from qshell.shellproof import check
from tests.shellproof.sandbox import Sandbox

UNARY = [f"-{name}" for name in "abcdefghkprsuwxGLNOSnzto"]
BINARY = ["-nt", "-ot", "-ef", "=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge"]
OPERANDS = ["F0", "F1", "F2", "F3", "~/H0", "~", '"F0"', "1", "0", "x"]
COND_OPERANDS = [*OPERANDS, "F*", "{F0,F1}", "\\~/H0", '~"/H0"', "~/'H0'"]


def _expression(
    operand: st.SearchStrategy[str], join: list[str], opening: str, closing: str
) -> st.SearchStrategy[str]:
    leaf = st.one_of(
        st.tuples(st.sampled_from(UNARY), operand).map(" ".join),
        st.tuples(operand, st.sampled_from(BINARY), operand).map(" ".join),
        operand,
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            inner.map(lambda e: f"! {e}"),
            inner.map(lambda e: f"{opening} {e} {closing}"),
            st.tuples(inner, st.sampled_from(join), inner).map(" ".join),
        ),
        max_leaves=4,
    )


TOKENS = [*UNARY, *BINARY, *OPERANDS, "!", "\\(", "\\)"]
# whatever a line of words may mean to test: most of these are syntax errors, some are not
TEST_WORDS = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=6).map(" ".join)
TEST_ARGS = st.one_of(
    _expression(st.sampled_from(OPERANDS), ["-a", "-o"], "\\(", "\\)"), TEST_WORDS
)
COND_ARGS = _expression(st.sampled_from(COND_OPERANDS), ["&&", "||"], "(", ")")
LINES = st.one_of(
    TEST_ARGS.map(lambda a: f"test {a}"),
    TEST_ARGS.map(lambda a: f"[ {a} ]"),
    COND_ARGS.map(lambda a: f"[[ {a} ]]"),
)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Sandbox:
    """The project: a file, a directory, a symlink and a missing name; HOME has a file."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    box = Sandbox(tmp_path_factory.mktemp("file-tests"))
    (box.work / "F0").write_text("x\n")
    (box.work / "F1").mkdir()
    (box.work / "F2").symlink_to("F0")
    (box.home / "H0").write_text("x\n")
    if box.looked_at("[ -e F0 ]") != {box.work / "F0"}:
        pytest.skip("strace cannot trace bash's file tests here")
    return box


def reported(command: str, box: Sandbox) -> set[Path]:
    """The paths the proof says `command` reads, as bash expands them in the sandbox."""
    found: set[Path] = set()
    for read in check(command).reads:
        literal = read.literal and "~" not in read.raw
        paths = [box.work / read.text] if literal else box.expand(read.raw)
        found |= {Path(os.path.normpath(path)) for path in paths}
    return found


@seed(20250216)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=LINES)
def test_every_file_bash_tests_is_a_read_of_the_proof(line: str, sandbox: Sandbox) -> None:
    if not check(line).read_only:
        return
    looked = sandbox.looked_at(line)
    assert looked is not None
    missed = looked - reported(line, sandbox)
    assert not missed, f"{line!r}: bash looked at {sorted(map(str, missed))}, not reported"


@pytest.mark.parametrize(
    ("line", "files"),
    [
        ("[[ -d ~/H0 ]]", ["~/H0"]),
        ("[ ~/H0 -nt F0 ]", ["~/H0", "F0"]),
        ("[[ F0 -ef ~/H0 ]]", ["F0", "~/H0"]),
        ("test F3 -ot F0", ["F3", "F0"]),
        ("[ -a F0 ]", ["F0"]),  # -a with one operand is a file test, not `and`
        ("[ -e F0 -a -L F2 -o ! -s F3 ]", ["F0", "F2", "F3"]),
        ("test ! \\( -e F0 -o -d F1 \\)", ["F0", "F1"]),
        ("[[ -e F0 && ( -r F1 || ! -x F2 ) ]]", ["F0", "F1", "F2"]),
        ("[[ -e F* ]]", ["F*"]),  # [[ ]] does not glob: it tests the file named F*
        ("[[ -e ~/'H0' ]]", ["~/H0"]),
        ("test -f F0 x y", ["F0"]),  # a syntax error after the test: F0 was still looked at
    ],
)
def test_file_operands_are_reads(line: str, files: list[str], sandbox: Sandbox) -> None:
    home = str(sandbox.home)
    expected = {Path(home + f[1:]) if f.startswith("~") else sandbox.work / f for f in files}
    assert check(line).read_only, check(line).reason
    assert reported(line, sandbox) == expected
    looked = sandbox.looked_at(line)
    assert looked and looked <= expected  # `&&` and `||` may skip what they need not test


@pytest.mark.parametrize(
    "line",
    [
        "[ F0 = F1 ]",
        "[[ F0 == F* ]]",
        "[[ F0 != ~/H0 ]]",
        "[[ F0 =~ ^F ]]",
        "[ -n F0 ]",
        "[[ -z F0 ]]",
        "[ F0 ]",
        "[[ F0 ]]",
        "[ ! F0 ]",
        "[ F0 -a F1 ]",  # three words: -a joins two string tests
        "[ ! -a F0 ]",
        "[ -t 1 ]",
        "[[ -o errexit ]]",
        "[ 1 -eq 1 ]",
        "[[ 1 -lt 2 ]]",
        "test F0 '<' F1",
    ],
)
def test_strings_numbers_and_patterns_are_no_reads(line: str, sandbox: Sandbox) -> None:
    proof = check(line)
    assert proof.read_only, proof.reason
    assert proof.reads == ()
    assert sandbox.looked_at(line) == set()
