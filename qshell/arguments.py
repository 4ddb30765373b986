"""The command line's vocabulary: qshell's argument parser and what its flags mean.

`build_parser` is the parser `cli.main` reads argv with, and `add_options` its options,
which the completion scripts are generated from too (completions.py); `settings_flags` and
`plugin_request` turn parsed arguments into the settings layer and the plugin request a run
uses. It holds definitions only: it runs nothing, builds no session, and imports nothing
heavier than argparse, so `qshell --version` stays fast. A bad command line raises
`UsageError`, which cli turns into exit code 42. No state, no threads.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from qshell import __version__
from qshell.errors import InputError

if TYPE_CHECKING:
    from qshell.plugins import PluginRequest

# each subcommand `qshell NAME` dispatches: what it is for, and the options of `qshell`'s
# parser it reads (the completion scripts offer those; completions.py)
SUBCOMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "stats": ("tokens and caching of this project's sessions", ("--json",)),
    "plugins": ("the gate plugins a run here loads", ("--json", "--plugin", "--no-plugins")),
    "doctor": ("provider, model, sandbox, settings files in force", ()),
}
CHECK_SHELL = "check-shell"  # has options of its own (check_shell.py)
APPROVAL_MODES = ("default", "auto-edit", "plan", "yolo")
OUTPUT_FORMATS = ("text", "json", "stream-json")
DESCRIPTION = "A fast terminal coding agent that predicts and pre-runs your next prompt."


class UsageError(InputError):
    """A bad command line; becomes exit code 42."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="qshell",
        description=DESCRIPTION,
        epilog="Subcommands: `qshell stats`, `qshell plugins`, `qshell doctor`, `qshell check-shell`. "
        "Exit codes: 0 ok, 1 error, "
        "41 auth, 42 bad input, 52 configuration, 53 maxTurns reached, 54 answer incomplete, "
        "130 interrupted.",
    )
    parser.add_argument("prompt", nargs="*", help="the prompt (print mode), or a subcommand")
    return add_options(parser)


def add_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `qshell` (the subcommands read theirs from the same parser); the
    completion scripts are generated from them too (completions.py)."""
    parser.add_argument("-p", "--print", action="store_true", help="answer once and exit")
    parser.add_argument(
        "-o", "--output-format", choices=OUTPUT_FORMATS, default="text", help="print-mode output"
    )
    parser.add_argument("-m", "--model", help="the model to use")
    parser.add_argument("--fast-model", help="the model for background tasks")
    parser.add_argument(
        "--provider", choices=("auto", "openai", "anthropic", "local"), help="the model's API"
    )
    parser.add_argument("--approval-mode", choices=APPROVAL_MODES, help="what runs without asking")
    parser.add_argument(
        "-y", "--yolo", action="store_true", help="approve every tool call (--approval-mode yolo)"
    )
    parser.add_argument("--max-turns", type=int, metavar="N", help="model rounds per turn")
    session = parser.add_mutually_exclusive_group()
    session.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="resume the latest session here",
    )
    session.add_argument("-r", "--resume", metavar="ID", help="resume the session with this id")
    parser.add_argument(
        "--append-system-prompt", default="", metavar="TEXT", help="added to the system prompt"
    )
    parser.add_argument(
        "--simple-prompt", action="store_true", help="plain line mode (no escape codes)"
    )
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE",
        type=Path,
        help="load this gate plugin file (repeatable; consulted first, in order)",
    )
    parser.add_argument(
        "--no-plugins",
        action="store_true",
        help="load no plugin from the user folder or installed packages",
    )
    parser.add_argument(
        "--acp", action="store_true", help="serve the Agent Client Protocol on stdio (editors)"
    )
    parser.add_argument("--json", action="store_true", help="JSON output for subcommands")
    parser.add_argument(
        "--print-completion",
        choices=("bash", "zsh", "fish"),
        metavar="SHELL",
        help="print the completion script for bash, zsh or fish",
    )
    parser.add_argument("--version", action="version", version=f"qshell {__version__}")
    return parser


def settings_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that set settings, as the top layer `assemble_settings` applies."""
    mode = "yolo" if args.yolo else args.approval_mode
    return {
        "model": args.model,
        "fast_model": args.fast_model,
        "provider": args.provider,
        "approval_mode": mode,
        "max_turns": args.max_turns,
    }


def plugin_request(args: argparse.Namespace) -> PluginRequest:
    """The gate plugins the flags ask for: `--plugin` files, then (unless `--no-plugins`)
    the user folder's and the installed ones that QSHELL_PLUGINS selects."""
    from qshell.plugins import PluginRequest

    return PluginRequest(files=tuple(args.plugin), discover=not args.no_plugins)
