"""`qshell check-shell`: would qshell run these shell commands without asking, and why not.

An audit of the shell read-only proof, the read scope and the gate plugins, for users and
reviewers: for each command (from the arguments, else one per line of standard input) it
prints whether qshell runs it without asking in the project `--root` — in default and
auto-edit modes, and speculatively — and otherwise the reason and who decided. It asks the
very functions the runners ask: `permissions.policy.shell_concern` (the proof and its scope)
with the tool context a session in that root gets (sessions.tool_context), then the gate
plugins a session would load (compose.open_plugins: `--plugin` files, the user plugins
folder, entry points), through permissions/plugin_gate.py `rule` — `consult`'s decision and
fixed limits, unrecorded since nothing runs — in each of those modes; the strictest live
answer is the one printed (a plugin that asks in either mode asks), with the plugin named.
It runs none of the commands (only bash's own expansion of globs, braces and tildes, see
permissions/shell_scope.py). `--json` prints one object per line: command, auto_run,
verdict (allow, ask, deny), reason, decided_by (`qshell` or the plugin) and speculates.
Main thread.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

from qshell.errors import InputError

PROG = "qshell check-shell"


class _CheckShellParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(f"{message} (see {PROG} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _CheckShellParser(
        prog=PROG,
        description="Say whether qshell would run shell commands without asking, and why not.",
        epilog="With no COMMAND, commands are read from standard input, one per line.",
    )
    parser.add_argument("commands", nargs="*", metavar="COMMAND", help="a bash command line")
    parser.add_argument("--root", type=Path, help="the project root (default: this directory)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a gate plugin file, as `qshell --plugin` loads it (repeatable)",
    )
    parser.add_argument(
        "--no-plugins", action="store_true", help="no plugin from the user folder or packages"
    )
    return parser


def run_check_shell(
    argv: Sequence[str],
    *,
    cwd: Path,
    environ: Mapping[str, str],
    stdin: TextIO,
    stdout: TextIO,
) -> int:
    from qshell.compose import open_plugins
    from qshell.config import load_settings, project_root_for
    from qshell.permissions.audit import audit_shell
    from qshell.plugins import PluginRequest
    from qshell.sessions import tool_context

    args = build_parser().parse_args(list(argv))
    given = args.root if args.root is not None else cwd
    root = project_root_for(given if given.is_absolute() else cwd / given)
    if not root.is_dir():
        raise InputError(f"--root {root} is not a directory")
    settings = load_settings(project_root=root, environ=environ)
    files = tuple(path if path.is_absolute() else cwd / path for path in args.plugin)
    request = PluginRequest(files=files, discover=not args.no_plugins)
    plugins = open_plugins(settings, request, root=root, environ=environ)
    ctx = tool_context(settings, root=root, environ=environ, plugins=plugins)
    for command in _commands(args.commands, stdin):
        audit = audit_shell(command, ctx)
        if args.json:
            stdout.write(json.dumps(audit.record(), ensure_ascii=False) + "\n")
        else:
            stdout.write(audit.line() + "\n")
    return 0


def _commands(given: Sequence[str], stdin: TextIO) -> Iterable[str]:
    if given:
        yield from given
        return
    for line in stdin:
        command = line.rstrip("\n")
        if command.strip():
            yield command
