"""Where the proof's model of bash once differed from bash, class by class, shown with real bash.

Each class has the proof's side (the command is refused, or read as bash reads it) and, when
bash is installed, bash's side run in a throwaway directory: what bash really does with the
text (writes the file, runs the command, reads the other path) is why the proof must refuse.
Classes: ANSI-C quoting, `[ … ]` as the simple command it is, named descriptor redirections,
words the parser splits where bash does not, a newline the parser reads across, newlines
inside double quotes, tildes, brace expansion, heredoc delimiters, backslashes in backquotes,
and what stays as it was (comments, `#` in words, `!`, extglob, `<(…)`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from qshell.shellproof import check
from tests.waiting import wait_until

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
    return wait_until(path.exists, 1.0, poll_s=0.02)


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


# ------------------------------------------------------------------ word boundaries


@pytest.mark.parametrize("command", ["cat [i]\\d_rsa", "cat ''\\a", 'echo "x"\\[', "cat x<(ls)"])
def test_words_the_parser_splits_but_bash_joins_are_refused(command: str):
    verdict = check(command)
    assert not verdict.read_only
    assert "nothing between them" in verdict.reason, verdict.reason


@needs_bash
def test_bash_reads_a_glob_glued_to_an_escaped_letter_as_one_word(tmp_path: Path):
    (tmp_path / "id_rsa").write_text("SECRET\n")  # the parser saw `[i]` and `d_rsa`
    assert run_bash("cat [i]\\d_rsa", tmp_path).stdout == b"SECRET\n"


@pytest.mark.parametrize("command", ["echo a\n\\\ntouch made", "echo a\\\\\n\\\ntouch made"])
def test_a_newline_the_parser_reads_across_ends_the_command_in_bash(command: str, tmp_path: Path):
    assert "newline inside one command" in check(command).reason
    if BASH is not None:
        run_bash(command, tmp_path)
        assert (tmp_path / "made").exists()


def test_newlines_between_commands_and_after_operators_stay_allowed():
    for command in ("ls\nwc -l x", "ls |\nwc", "echo $(\nls\n)", "{ ls\n}", "cat <<EOF\nx\nEOF"):
        assert check(command).read_only, command


def test_newlines_and_blanks_inside_double_quotes_are_kept(tmp_path: Path):
    for word, text in (('"a\nb"', "a\nb"), ('"x\n "', "x\n "), ('" "', " "), ('"\t$X"', None)):
        verdict = check(f"cat -- {word}")
        assert verdict.read_only, verdict.reason
        if text is not None:
            assert verdict.paths == (text,)
            if BASH is not None:
                assert printed(word, tmp_path) == [text]


# ------------------------------------------------------------------ tildes and braces


@pytest.mark.parametrize("word", ["~+/x", "~-/x", "~root/.bashrc", "~0", "a=~/x", "x=b:~"])
def test_tildes_bash_expands_at_run_time_are_not_literal_paths(word: str):
    verdict = check(f"cat {word}")
    assert verdict.read_only
    assert verdict.paths == ()
    assert verdict.dynamic_paths == (word,)


def test_a_plain_tilde_stays_a_literal_path_as_documented():
    assert check("cat ~/notes ~").paths == ("~/notes", "~")
    assert check("cat '~'/x").paths == ("~/x",)


@needs_bash
def test_bash_expands_tildes_after_the_equals_of_an_assignment_like_word(tmp_path: Path):
    home = tmp_path / "home"
    assert printed("a=~/x x=b:~ --a=~ ~+", tmp_path) == [
        f"a={home}/x",
        f"x=b:{home}",
        "--a=~",
        str(tmp_path),
    ]


def test_braces_bash_expands_past_an_unmatched_close_are_run_time(tmp_path: Path):
    command = "sort {x}f,-o} out"  # bash: sort 'x}f' -o out
    assert "could be an option" in check(command).reason
    if BASH is not None:
        (tmp_path / "x}f").write_text("b\na\n")
        run_bash(command, tmp_path)
        assert (tmp_path / "out").read_text() == "a\nb\n"
    assert check("echo {x} {}").read_only


# ------------------------------------------------------------------ heredocs

HEREDOC_ATTACKS = [
    # bash joins the continued line of an unquoted body, and it is the delimiter
    "cat <<EOF\nE\\\nOF\ntouch made\nEOF",
    # inside quotes the backslash stays part of the delimiter
    "cat <<'a\\b'\nx\na\\b\ntouch made\nab",
    'cat <<"E\\OF"\nx\nE\\OF\ntouch made\nEOF',
]


@pytest.mark.parametrize("command", HEREDOC_ATTACKS)
def test_heredocs_end_where_bash_ends_them(command: str, tmp_path: Path):
    verdict = check(command)
    assert not verdict.read_only
    assert "heredoc" in verdict.reason, verdict.reason
    if BASH is not None:
        run_bash(command, tmp_path)
        assert (tmp_path / "made").exists()


@pytest.mark.parametrize(
    "command",
    [
        "cat <<\\EOF\n$(rm x)\nEOF",
        'cat <<"EOF"\nx\nEOF',
        "cat <<EOF\nx\\\\\nEOF",
        "cat <<-EOF\n\tx\n\tEOF",
    ],
)
def test_ordinary_heredocs_stay_read_only(command: str):
    assert check(command).read_only, check(command).reason


# ------------------------------------------------------------------ backquotes

BACKQUOTE_ATTACKS = [
    "echo `echo \\`touch made\\``",  # bash: \` is a nested substitution
    'echo `echo "\\$(touch made)"`',  # bash: \$ becomes $, then $(…) runs
]


@pytest.mark.parametrize("command", BACKQUOTE_ATTACKS)
def test_backslashes_inside_backquotes_are_refused(command: str, tmp_path: Path):
    assert "backslash inside" in check(command).reason
    if BASH is not None:
        run_bash(command, tmp_path)
        assert (tmp_path / "made").exists()


def test_plain_backquotes_stay_read_only():
    assert check('echo `git rev-parse HEAD` "`pwd`"').read_only


# ------------------------------------------------------------------ where the models agree


def test_a_backslash_newline_inside_a_comment_does_not_continue_it(tmp_path: Path):
    assert check("echo a # x \\\ntouch made").reason == "'touch' makes files or changes their times"
    if BASH is not None:
        run_bash("echo a # x \\\ntouch made", tmp_path)
        assert (tmp_path / "made").exists()


def test_a_hash_inside_a_word_is_no_comment(tmp_path: Path):
    verdict = check("cat a#b 'x'#y")
    assert verdict.paths == ("a#b", "x#y")
    if BASH is not None:
        assert printed("a#b 'x'#y", tmp_path) == ["a#b", "x#y"]


@pytest.mark.parametrize("command", ["echo @(a)", "echo !(a)", "echo +(a|b)"])
def test_extglob_words_are_refused_and_a_syntax_error_in_bash(command: str, tmp_path: Path):
    assert not check(command).read_only
    if BASH is not None:
        assert b"syntax error" in run_bash(command, tmp_path).stderr


def test_history_expansion_is_off_in_bash_dash_c(tmp_path: Path):
    assert check("echo !x !!").read_only
    if BASH is not None:
        assert printed("!x !!", tmp_path) == ["!x", "!!"]


def test_process_substitution_stays_checked():
    assert check("diff <(sort a) <(sort b)").read_only
    assert not check("diff <(sort a) >(rm b)").read_only
    assert check('echo "<(rm x)"').read_only
