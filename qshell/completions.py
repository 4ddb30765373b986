"""Shell completion scripts for bash, zsh and fish, generated from qshell's real parsers.

The scripts describe the command line as `cli.main` reads it: the options of
`arguments.add_options`, and the subcommands (`stats`, `plugins`, `doctor`, and
`check-shell` with the options of its own parser) as the first word. shtab writes all three
scripts from that
argparse view; the ones checked into the top-level `completions/` folder are this module's
output (`python -m qshell.completions` rewrites them, `--check` says whether they drifted),
and `qshell --print-completion SHELL` prints the same text. `/` commands are not on the
command line (they are typed inside qshell, whose prompt completes them), so no script
offers them. It must not run qshell or change its parsers' behaviour: the view is built
from fresh parsers, and shtab is imported only when a script is generated. Main thread.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qshell import arguments, check_shell
from qshell.errors import ConfigError

FILES = {"bash": "qshell.bash", "zsh": "_qshell", "fish": "qshell.fish"}
CHECKED_IN = Path(__file__).resolve().parent.parent / "completions"  # in a source checkout
CHECK_SHELL_HELP = "would these shell commands run without asking?"


def actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A parser's actions (argparse keeps them in an attribute it never made public)."""
    return list(parser._actions)


def completes(parser: argparse.ArgumentParser, how: dict[str, Any]) -> None:
    """Mark the options in `how` with what shtab completes their value with."""
    for action in actions(parser):
        for option in action.option_strings:
            if option in how:
                action.complete = how[option]  # type: ignore[attr-defined]


def completion_view() -> argparse.ArgumentParser:
    """`qshell`'s parser with its subcommands as argparse subcommands."""
    import shtab

    top = arguments.add_options(
        argparse.ArgumentParser(prog="qshell", description=arguments.DESCRIPTION)
    )
    completes(top, {"--plugin": shtab.FILE})
    commands = top.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name, (help_text, keep) in arguments.SUBCOMMANDS.items():
        sub = arguments.add_options(
            commands.add_parser(name, help=help_text, description=help_text)
        )
        for action in actions(sub):
            if action.option_strings and not {"-h", *keep} & set(action.option_strings):
                action.help = argparse.SUPPRESS
        completes(sub, {"--plugin": shtab.FILE})
    shell = commands.add_parser(
        arguments.CHECK_SHELL,
        parents=[check_shell.build_parser()],
        add_help=False,
        help=CHECK_SHELL_HELP,
        description=CHECK_SHELL_HELP,
    )
    completes(shell, {"--root": shtab.DIRECTORY, "--plugin": shtab.FILE})
    return top


def script(shell: str) -> str:
    """The completion script for `shell` (bash, zsh or fish), ending in a newline."""
    if shell not in FILES:
        raise ConfigError(f"no completion script for {shell!r}: choose bash, zsh or fish")
    try:
        import shtab
    except ImportError:
        raise ConfigError(
            "generating a completion script needs the shtab package (pip install shtab); "
            "the generated scripts are also in qshell's completions/ folder"
        ) from None
    return str(shtab.complete(completion_view(), shell=shell)).rstrip("\n") + "\n"


def drifted(directory: Path) -> list[str]:
    """The scripts in `directory` that differ from (or are missing beside) the generated ones."""
    return [
        name
        for shell, name in FILES.items()
        if not (directory / name).is_file() or (directory / name).read_text() != script(shell)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m qshell.completions [--check] [--dir DIR]`: rewrite the scripts, or check them."""
    parser = argparse.ArgumentParser(prog="python -m qshell.completions", description=__doc__)
    parser.add_argument("--dir", type=Path, default=CHECKED_IN, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="exit 1 if a script drifted")
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = drifted(args.dir)
            for name in stale:
                sys.stderr.write(f"{args.dir / name} differs: run python -m qshell.completions\n")
            return 1 if stale else 0
        args.dir.mkdir(parents=True, exist_ok=True)
        for shell, name in FILES.items():
            (args.dir / name).write_text(script(shell))
            sys.stdout.write(f"wrote {args.dir / name}\n")
    except ConfigError as exc:
        sys.stderr.write(f"qshell: {exc}\n")
        return int(exc.exit_code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
