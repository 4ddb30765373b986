"""allow_readonly_extras: more shell commands that qshell may run without asking.

qshell runs a shell command without asking (and in a speculation) only when it proves the
command read-only; a command its rules do not know asks. This plugin declares a few more
read-only through `qshell_shell_readonly`:
- the line counters `cloc`, `tokei` and `scc`, without the flags that write a report
  file (`cloc --out`, `--report-file`, `--sql`, `scc -o`, …) or run git (`cloc --vcs`);
- `shellcheck` and `yq` (but `yq -i`, which edits in place);
- `git shortlog` and `du -sh`, which qshell's own rules already prove in most forms: the
  rules here only add forms those refuse, so they repeat every refusal that matters
  (`--output` writes a file, `du -L` follows links out of the tree);
- `<tool> --version` alone for common interpreters and toolchains (`python3 --version`).
A declaration covers one simple command: qshell still refuses redirections to files,
substitutions it cannot prove, `cd` outside a subshell and environment prefixes, still
applies the read scope to every operand (outside the project or a secret: it asks), and
still runs the command in its sandbox with the sanitised environment. No options.
"""

from __future__ import annotations

from collections.abc import Sequence

from qshell.plugins import hookimpl

LINE_COUNTERS = frozenset({"cloc", "tokei", "scc"})
# flags (or their `--flag=` forms) that make a line counter write a file or run a program
WRITING_FLAGS = frozenset(
    {
        "--out",
        "--report-file",
        "--sql",
        "--sql-append",
        "--write-lang-def",
        "--write-lang-def-incl-dup",
        "--vcs",
        "--git",
        "--count-and-diff",
        "-o",
        "--output",
        "--format-multi",
    }
)
VERSIONED = frozenset(
    {"python", "python3", "node", "deno", "ruby", "go", "cargo", "rustc", "java", "gcc"}
)


@hookimpl
def qshell_shell_readonly(command: str, argv: Sequence[str]) -> bool | None:
    return _declared(command, list(argv[1:])) or None  # None: not ours to say


def _declared(command: str, args: list[str]) -> bool:
    if command in LINE_COUNTERS or command == "shellcheck":
        return not any(_flag(a) in WRITING_FLAGS for a in args)
    if command == "yq":
        return not any(_flag(a) in ("-i", "--inplace") or _bundles(a, "i") for a in args)
    if command == "git" and args[:1] == ["shortlog"]:
        return not any(_flag(a) == "--output" for a in args)
    if command == "du" and args[:1] == ["-sh"]:
        return not any(_flag(a) == "--dereference" or _bundles(a, "L") for a in args)
    return command in VERSIONED and args in (["--version"], ["version"])


def _flag(word: str) -> str:
    """`--name` of `--name=value`; the word itself otherwise."""
    return word.partition("=")[0] if word.startswith("--") else word


def _bundles(word: str, letter: str) -> bool:
    """Whether `word` is a bundle of short flags that includes `letter` (`-Lsh`)."""
    return word.startswith("-") and not word.startswith("--") and letter in word[1:]
