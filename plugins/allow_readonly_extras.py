"""allow_readonly_extras: more shell commands that qshell may run without asking.

qshell runs a shell command without asking (and in a speculation) only when it proves the
command read-only; a command its rules do not know asks. This plugin declares a few more
read-only through `qshell_shell_readonly`:
- the line counters `cloc`, `tokei` and `scc` and the checker `shellcheck`, each with
  only the options of its allowlist (`SAFE_OPTIONS`: output formats, sorting,
  exclusions) — any other option (one that writes a report, runs git or a program) asks;
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

# each counter or checker with the only options it may have: an allowlist, since one
# unknown spelling (`--report_file`, `-ofile`, `--extract-with=CMD`) is enough to write a
# file or run a program; a value may follow as its own word (a harmless extra operand)
SAFE_OPTIONS: dict[str, frozenset[str]] = {
    "cloc": frozenset(
        {"--by-file", "--quiet", "--json", "--yaml", "--csv", "--md", "--hide-rate"}
        | {"--exclude-dir", "--exclude-lang", "--include-lang", "--exclude-ext"}
    ),
    "tokei": frozenset({"--files", "-f", "--sort", "-s", "--exclude", "-e", "--compact", "-C"}),
    "scc": frozenset(
        {"--by-file", "--no-cocomo", "--wide", "-w", "--sort", "-s"} | {"--exclude-dir"}
    ),
    "shellcheck": frozenset(
        {"--format", "-f", "--severity", "-S", "--exclude", "-e", "--shell", "-s"}
    ),
}
# (not cargo or rustc: rustup runs the toolchain a project's rust-toolchain.toml names)
VERSIONED = frozenset({"python", "python3", "node", "deno", "ruby", "go", "java", "gcc"})


@hookimpl
def qshell_shell_readonly(command: str, argv: Sequence[str]) -> bool | None:
    return _declared(command, list(argv[1:])) or None  # None: not ours to say


def _declared(command: str, args: list[str]) -> bool:
    if command in SAFE_OPTIONS:
        return all(_flag(a) in SAFE_OPTIONS[command] for a in args if a.startswith("-"))
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
