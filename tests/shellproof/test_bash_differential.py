"""The proof's reading of words against real bash: every word it accepts, bash reads the same.

Hypothesis builds lines of words from quotes, ANSI-C escapes, braces, tildes, globs, line
continuations, carriage returns and `#`, with a separator word between them. The proof judges
`echo WORDS` (its rule takes any operand), recording the decoded `Word`s; bash prints the same
words with `printf '%s\\0' WORDS` in a scratch directory with a few files (one named like an
option), HOME inside it and no command on PATH. For every line the proof accepts: a literal
word is exactly what bash prints (a leading `~` kept, as `Proof.paths` documents), and a
run-time word prints as its flags admit: several words only if it `splits`, one starting with
`-` only if it is `flaggable`, each beginning with its literal `prefix`. Bash only ever runs
`printf` here: no `$` but the one opening `$'…'`, no backquote, `(` or `)` is generated.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from qshell.shellproof import check, rules, walker
from qshell.shellproof.rules import Judged, Word

SEPARATOR = "QQSEPQQ"
BASH = shutil.which("bash")
FILES = ("a", "ab", "b.c", "-x", ".h", "x y", "~x", "d/e")

PLAIN = [*"abxy01-./=:,@%+^_!#é"]
GLOBS = ["*", "?", "[ab]", "[!a]", "[^a]", "[", "]", "[a-b]", "*b", ".*", "[]]", "d/*", "-*"]
BRACES = [
    *("{", "}", ",", "..", "{a,b}", "{1..3}", "{a..c}", "{}", "{x}", "{,}", "{a,{b,c}}"),
    *("{-a,b}", "{1..3..2}", "{a,b", "a,b}", "{a\\,b}", "{a','b}", "{~,a}", "{#a,b}"),
]
TILDES = [
    *("~", "~/", "~+", "~-", "~root", "~nosuch", "~1", "~0", "~+/", "a=~", "a=x:~", "--a=~"),
    *("a[1]=~", "a+=~", "x=~/d", "~/d", "~x"),
]
ESCAPED = [f"\\{c}" for c in [*PLAIN, *" \t;|&<>'\"\\*?[]{}~#\n\r"]]
SINGLE_QUOTED = [*PLAIN, *' \t\n\r;|&<>*?{}~#!\\"', "\\\n", "é"]
DOUBLE_QUOTED = [
    *PLAIN,
    *(" ", "\t", "\n", "\r", "'", "*", "{a,b}", "~", "!", "#", ";|&<>"),
    *("\\\\", '\\"', "\\a", "\\\n", "\\'", "\\!", "\\~", "\\#"),
]
ANSI_C = [
    *(f"\\{c}" for c in "abeEfnrtv\\'\"?zq8 "),
    *("\\455", "\\055", "\\101", "\\1", "\\12", "\\0", "\\0101", "\\777", "\\400"),
    *("\\x2d", "\\x2D", "\\x41", "\\x7f", "\\x80", "\\xff", "\\x", "\\xg", "\\x4"),
    *("\\x{41}", "\\x{12d}", "\\u002d", "\\u2d", "\\u", "\\u00e9", "\\uzz", "\\u7f"),
    *("\\U0000002d", "\\U2d", "\\U", "\\U1F600", "\\c-", "\\c?", "\\c@", "\\ca"),
    *("\\c[", "\\cZ", "\\c\\\\", "\\c\\", "\\c", "\\\n", "\\\\\\"),
    *PLAIN,
    *('"', " ", "é", "\n"),
]
LONE = ["\\\n", "\r", "'", '"', "\\"]  # a line continuation, a CR, an unpaired quote


def _joined(
    pieces: st.SearchStrategy[str], *, min_size: int, max_size: int
) -> st.SearchStrategy[str]:
    return st.lists(pieces, min_size=min_size, max_size=max_size).map("".join)


FRAGMENT = st.one_of(
    st.sampled_from(PLAIN),
    st.sampled_from(GLOBS),
    st.sampled_from(BRACES),
    st.sampled_from(TILDES),
    st.sampled_from(ESCAPED),
    _joined(st.sampled_from(SINGLE_QUOTED), min_size=0, max_size=5).map(lambda s: f"'{s}'"),
    _joined(st.sampled_from(DOUBLE_QUOTED), min_size=0, max_size=5).map(lambda s: f'"{s}"'),
    _joined(st.sampled_from(ANSI_C), min_size=0, max_size=4).map(lambda s: f"$'{s}'"),
    st.sampled_from(LONE),
)
WORD = _joined(FRAGMENT, min_size=1, max_size=5)
LINE = st.lists(WORD, min_size=1, max_size=4)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with a few files for globs to match, an empty PATH directory and a HOME."""
    root = tmp_path_factory.mktemp("bash-words")
    work = root / "work"
    for name in FILES:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("")
    (root / "home").mkdir()
    (root / "empty-path").mkdir()
    return root


def bash_words(line: str, root: Path) -> list[str] | None:
    """What bash makes of `line` as printf's arguments, or None when bash refuses the line."""
    assert BASH is not None
    env = {"PATH": str(root / "empty-path"), "HOME": str(root / "home"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [BASH, "-c", f"printf '%s\\0' {SEPARATOR} {line}"],  # printf runs its format once
        cwd=root / "work",
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=5,
    )
    if done.returncode != 0 or done.stderr:
        return None
    printed = done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]
    assert printed[0] == SEPARATOR, printed
    return printed[1:]


def proof_words(line: str, monkeypatch: pytest.MonkeyPatch) -> list[Word] | None:
    """The words the proof decodes for `echo line`, or None when it refuses the line."""
    seen: list[list[Word]] = []
    judge = rules.judge

    def recording(name: str, args: Sequence[Word]) -> Judged:
        seen.append(list(args))
        return judge(name, args)

    with monkeypatch.context() as patch:
        patch.setattr(walker, "judge", recording)
        verdict = check(f"echo {line}")
    if not verdict.read_only or verdict.reads:  # reads: bash saw `\\<file`, not words
        return None
    assert len(seen) == 1 and verdict.commands == ("echo",), (line, verdict)
    return seen[0]


def split_words(words: Sequence[Word]) -> list[list[Word]]:
    """The proof's words between separators."""
    out: list[list[Word]] = [[]]
    for word in words:
        if word.literal and word.text == SEPARATOR:
            out.append([])
        else:
            out[-1].append(word)
    return out


def split_printed(printed: Sequence[str]) -> list[list[str]]:
    """Bash's words between separators."""
    out: list[list[str]] = [[]]
    for text in printed:
        if text == SEPARATOR:
            out.append([])
        else:
            out[-1].append(text)
    return out


def literal_matches(word: Word, printed: str, home: str) -> bool:
    """A literal word prints as its text; a leading `~` or `~/` may print as HOME."""
    if printed == word.text:
        return True
    tilde = word.text == "~" or word.text.startswith("~/")
    return tilde and word.raw.lstrip("\\\n").startswith("~") and printed == home + word.text[1:]


def explain(words: list[Word], printed: list[str], home: str) -> str | None:
    """Why bash's words for one stretch of source words contradict the proof's, or None.
    Words that do not split print one each, so they pair up from both ends; what is left is
    the one word that may split (a stretch with two of them is not checked)."""
    splitting = [i for i, word in enumerate(words) if word.splits]
    if len(splitting) > 1:
        return None
    cut = splitting[0] if splitting else len(words)
    tail = len(words) - cut - 1 if splitting else 0
    if len(printed) < cut + tail or (not splitting and len(printed) != len(words)):
        return f"the proof reads {words!r}, bash {printed!r}"
    pairs = [([w], [p]) for w, p in zip(words[:cut], printed[:cut], strict=True)]
    if splitting:
        pairs.append(([words[cut]], printed[cut : len(printed) - tail]))
        pairs += [
            ([w], [p])
            for w, p in zip(words[cut + 1 :], printed[len(printed) - tail :], strict=True)
        ]
    for (word,), texts in pairs:
        problem = explain_one(word, texts, home)
        if problem:
            return problem
    return None


def explain_one(word: Word, printed: list[str], home: str) -> str | None:
    """Why bash's words for one proof Word contradict its flags, or None."""
    if word.literal:
        if len(printed) == 1 and literal_matches(word, printed[0], home):
            return None
        return f"literal {word.text!r} but bash printed {printed!r}"
    if not word.splits and len(printed) != 1:
        return f"{word!r} does not split but bash printed {printed!r}"
    for text in printed:
        if text.startswith("-") and not word.flaggable:
            return f"{word!r} is not flaggable but bash printed {text!r}"
        if not text.startswith(word.prefix):
            return f"{word!r} has prefix {word.prefix!r} but bash printed {text!r}"
    return None


def compare(line: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    words = proof_words(line, monkeypatch)
    if words is None:
        return None
    printed = bash_words(line, root)
    if printed is None:
        return f"the proof accepts {line!r}, bash refuses it"
    ours, theirs = split_words(words), split_printed(printed)
    if len(ours) != len(theirs):
        return f"{line!r}: the proof reads {words!r}, bash {printed!r}"
    for mine, bashs in zip(ours, theirs, strict=True):
        problem = explain(mine, bashs, str(root / "home"))
        if problem:
            return f"{line!r}: {problem}"
    return None


pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@seed(20240611)
@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(words=LINE)
def test_every_word_the_proof_accepts_reads_as_bash_reads_it(
    words: list[str], scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = f"  {SEPARATOR}  ".join(words)  # a word's last `\\` may quote the first blank
    problem = compare(line, scratch, monkeypatch)
    assert problem is None, problem
