"""Where the proof's model of bash once differed from bash, class by class, shown with real bash.

Each class has the proof's side (the command is refused, or read as bash reads it) and, when
bash is installed, bash's side run in a throwaway directory: what bash really does with the
text (writes the file, runs the command, reads the other path) is why the proof must refuse.
Classes: ANSI-C quoting, `[ … ]` as the simple command it is, named descriptor redirections.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from qshell.shellproof import check

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def run_bash(command: str, work: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `command` with bash in `work` (a throwaway directory), HOME inside it."""
    assert BASH is not None
    home = work / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return subprocess.run(
        [BASH, "-c", command],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
    )


def printed(word: str, work: Path) -> list[str]:
    """The words bash makes of `word` as an argument."""
    done = run_bash(f"printf '%s\\0' {word}", work)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


def eventually(path: Path) -> bool:
    """Whether `path` appears within a second (a background job may still be starting)."""
    deadline = time.monotonic() + 1.0
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()


def decoded(word: str) -> str | None:
    """The text the proof reads for `word` as an operand, or None when it refuses the word."""
    verdict = check(f"cat -- {word}")
    if not verdict.read_only:
        return None
    assert len(verdict.paths) == 1, verdict
    return verdict.paths[0]


# ------------------------------------------------------------------ ANSI-C quoting

ANSI_C = [
    ("$'\\455x'", "-x"),  # octal keeps the low 8 bits: 0o455 & 0xff is '-'
    ("$'\\055o'", "-o"),
    ("$'\\101'", "A"),
    ("$'\\1234'", "S4"),  # three digits at most
    ("$'\\0101'", "\b1"),
    ("$'\\x41'", "A"),
    ("$'\\x4z'", "\x04z"),
    ("$'\\x2d\\x2D'", "--"),
    ("$'\\x'", "\\x"),  # no digits: kept as typed
    ("$'\\xg'", "\\xg"),
    ("$'\\u41'", "A"),
    ("$'\\u002dx'", "-x"),
    ("$'\\U0000002dx'", "-x"),
    ("$'\\u'", "\\u"),
    ("$'\\z\\8\\q'", "\\z\\8\\q"),  # unknown escapes keep their backslash
    ("$'\\c-'", "\r"),
    ("$'\\c?'", "\x7f"),
    ("$'\\ca\\cZ'", "\x01\x1a"),
    ("$'\\c\\\\'", "\x1c"),  # `\c\\` is one control character
    ("$'\\e\\E\\a\\v'", "\x1b\x1b\a\v"),
    ("$'\\'\\\"\\?\\\\'", "'\"?\\"),
    ("$'a\\\nb'", "a\\\nb"),  # a backslash-newline is kept
    ("$'é\\x41'", "éA"),
    ("$'\\001\\177'", "\x01\x7f"),
]
ANSI_C_REFUSED = [
    "$'\\x80'",  # bytes >= 0x80: what a command sees depends on the locale
    "$'\\xff'",
    "$'\\200'",
    "$'\\u00e9'",  # beyond ASCII: the locale decides (C prints `\u00E9`)
    "$'\\U1F600'",
    "$'\\0'",  # NUL ends the word
    "$'a\\400'",  # 0o400 & 0xff is NUL too
    "$'\\c@'",
    "$'\\c'",
    "$'\\x{41}'",
]


@pytest.mark.parametrize(("word", "text"), ANSI_C)
def test_ansi_c_strings_are_decoded_as_bash_decodes_them(word: str, text: str, tmp_path: Path):
    assert decoded(word) == text
    if BASH is not None:
        assert printed(word, tmp_path) == [text]


@pytest.mark.parametrize("word", ANSI_C_REFUSED)
def test_ansi_c_escapes_bash_decodes_by_locale_or_truncates_are_refused(word: str):
    verdict = check(f"cat -- {word}")
    assert not verdict.read_only
    assert "ANSI-C" in verdict.reason or "NUL" in verdict.reason


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("sort $'\\455'o out f", "sort -o writes"),
        ("find . $'\\455'delete", "find -delete"),
        ("git log $'\\455\\455'output=x", "--output"),
        ("rg $'\\455\\455'pre=id x", "rg --pre"),
    ],
)
def test_an_octal_escape_that_wraps_to_a_dash_is_read_as_the_option(command: str, reason: str):
    verdict = check(command)
    assert not verdict.read_only
    assert reason in verdict.reason, verdict.reason


@needs_bash
def test_bash_writes_with_an_octal_escape_that_wraps_to_a_dash(tmp_path: Path):
    (tmp_path / "f").write_text("b\na\n")
    run_bash("sort $'\\455'o out f", tmp_path)
    assert (tmp_path / "out").read_text() == "a\nb\n"


def test_an_ansi_c_string_bash_ends_before_the_parser_does_is_refused(tmp_path: Path):
    command = "sort $'\\\\' -o out #'"  # bash: sort '\' -o out, then a comment
    assert "ANSI-C string that bash ends elsewhere" in check(command).reason
    if BASH is not None:
        (tmp_path / "\\").write_text("x\n")
        run_bash(command, tmp_path)
        assert (tmp_path / "out").exists()


# ------------------------------------------------------------------ [ … ] is a simple command

BRACKET_ATTACKS = [  # bash: `[ a` then `touch ]`, which makes the file `]`
    ("[ x > out ]", "out"),
    ("[ a || touch ]", "]"),
    ("[ a | touch ]", "]"),
    ("[ a == b&touch ]", "]"),
    ("[ a =~ x|touch ]", "]"),
    ("[ a = b ] || [ a >> out ]", "out"),
]


@pytest.mark.parametrize(("command", "made"), BRACKET_ATTACKS)
def test_operators_inside_brackets_are_read_as_bash_reads_them(
    command: str, made: str, tmp_path: Path
):
    assert not check(command).read_only
    if BASH is not None:
        run_bash(command, tmp_path)
        assert eventually(tmp_path / made)


def test_a_redirection_inside_brackets_is_refused_as_one():
    assert check("[ x > README.md ]").reason == "redirection to a file"
    assert check("[ a || rm ]").reason == "[ without a closing ]"


def test_an_input_redirection_inside_brackets_is_a_read():
    verdict = check("[ a < notes.txt ]")
    assert verdict.read_only
    assert verdict.paths == ("notes.txt",)
    assert "network" in check("[ a < /dev/tcp/127.0.0.1/9 ]").reason


@pytest.mark.parametrize(
    "command",
    ["[ -f x ]", "[ ! -d x ]", '[ "$X" = y ]', "[ -n a -a -z '' ]", "[ a != b ] && cat x"],
)
def test_ordinary_bracket_tests_stay_read_only(command: str):
    assert check(command).read_only, check(command).reason


def test_double_brackets_compare_strings_with_angle_brackets(tmp_path: Path):
    for command in ("[[ x > out ]]", "[[ x < out ]]"):
        assert check(command).read_only, command
        if BASH is not None:
            run_bash(command, tmp_path)
            assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ {NAME}> redirections


@pytest.mark.parametrize(
    "command",
    ["cat {fd}<f", "echo {PATH}>/dev/null", "ls {fd}>&-", "cat f {a[0]}</dev/null", "cat {fd}<<<x"],
)
def test_a_named_descriptor_redirection_is_refused(command: str):
    verdict = check(command)
    assert not verdict.read_only
    assert "named descriptor" in verdict.reason, verdict.reason


@needs_bash
def test_bash_assigns_path_through_a_named_descriptor_redirection(tmp_path: Path):
    done = run_bash('echo {PATH}>/dev/null; echo "$PATH"', tmp_path)
    assert done.stdout.decode().splitlines()[-1].isdigit()


def test_a_brace_word_not_glued_to_a_redirection_is_just_a_word():
    assert check("echo {fd} >/dev/null").read_only
    assert check("echo {a}x>/dev/null").read_only
