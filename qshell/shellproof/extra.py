"""Command forms the caller declares read-only beyond the rules (gate plugins, for instance).

`check(command, extra=rule)` asks `rule(name, argv)` about a simple command the rules in
`rules/` do not prove, and takes its word for that one command only: the walker's
structural checks (redirections, substitutions, `cd`, environment prefixes, parse gaps)
have already been applied to it and still are to the rest of the line, and the caller's
read-scope rules still apply to what the command reads. A declared command must consist of
literal words only (nothing bash expands at run time reaches `rule` or the command), and
what it reads is taken to be every operand and every option's value (`--x=v`, `-Lv`),
walked recursively — the current directory when there are none — so the scope rules see
at least as much as it could name. Pure; safe from any thread as long as `rule` is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qshell.shellproof.rules.spec import Judged, Word, literal_read, read_of

ReadOnlyRule = Callable[[str, Sequence[str]], bool]
"""`rule(name, argv)`: True when the simple command (argv: its words, the name first) only
reads."""


def declared(name: str, args: Sequence[Word], rule: ReadOnlyRule) -> Judged | None:
    """The Judged of a command `rule` declares read-only, else None."""
    if not all(word.literal for word in args):
        return None
    if rule(name, [name, *(word.text for word in args)]) is not True:
        return None
    operands = [word for word in args if not word.text.startswith("-")]
    reads = [read_of(word, recursive=True) for word in operands]
    values = [option_value(word.text) for word in args if word.text.startswith("-")]
    reads += [literal_read(value, recursive=True) for value in values if value]
    label = name
    if name == "git":  # the caller checks git's configuration for what a subcommand may do
        label = f"git {operands[0].text}" if operands else "git"
    return Judged(label, tuple(reads) or (literal_read(".", recursive=True),))


def option_value(text: str) -> str:
    """What an option word may carry that names a file: after `=` (`--config=x`), or
    after the letter of a short option (`-L/dir`, `-ofile`); "" for none. Which letters
    take a value is not known here, so a cluster of flags (`-la`) counts too: a read of
    `a` in the project is harmless, and a value outside it is never missed."""
    if "=" in text:
        return text.partition("=")[2]
    if not text.startswith("--") and len(text) > 2:
        return text[2:]
    return ""
