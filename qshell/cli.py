"""Command line: parse arguments, assemble settings, and pick a front-end.

`main(argv) -> int` is the composition root and is callable in-process by tests; `entry()`
is the console script. The parser and what its flags mean live in arguments.py. Start-up
stays fast: only argparse is imported before the arguments are known, so `qshell --version`
loads nothing heavy. User errors become one
line on stderr and their documented exit code, never a traceback. Runs in the main thread.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from qshell import gcpause
from qshell.arguments import (
    CHECK_SHELL,
    SUBCOMMANDS,
    UsageError,
    build_parser,
    plugin_request,
    settings_flags,
)

STDIN_CAP_BYTES = 8 * 1024 * 1024
STDIN_FIRST_BYTE_WAIT_S = 0.5
EXIT_INPUT = 42


def _read_stdin(stdin: TextIO, *, wait_for_first: bool) -> str:
    """Piped input, capped; gives up quickly when a prompt was given and nothing arrives."""
    if wait_for_first:
        import select

        try:
            ready, _, _ = select.select([stdin], [], [], STDIN_FIRST_BYTE_WAIT_S)
        except (ValueError, OSError, TypeError):
            ready = [stdin]
        if not ready:
            return ""
    data = stdin.read(STDIN_CAP_BYTES)
    return data or ""


def main(
    argv: Sequence[str] | None = None,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> int:
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    stderr = stderr if stderr is not None else sys.stderr
    environ = dict(os.environ if environ is None else environ)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = None
    if argv[:1] != [CHECK_SHELL]:  # check-shell has options of its own
        try:
            args = build_parser().parse_args(argv)
        except UsageError as exc:
            stderr.write(f"qshell: {exc} (see qshell --help)\n")
            return EXIT_INPUT
    from qshell.errors import QshellError

    try:
        if args is None:
            from qshell.check_shell import run_check_shell

            place = cwd or Path(os.getcwd())
            return run_check_shell(argv[1:], cwd=place, environ=environ, stdin=stdin, stdout=stdout)
        return _dispatch(args, stdin=stdin, stdout=stdout, stderr=stderr, environ=environ, cwd=cwd)
    except QshellError as exc:
        stderr.write(f"qshell: {exc}\n")
        return int(exc.exit_code)
    except KeyboardInterrupt:
        stderr.write("qshell: interrupted\n")
        return 130


def _dispatch(
    args: argparse.Namespace,
    *,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    environ: dict[str, str],
    cwd: Path | None,
) -> int:
    from qshell.config import assemble_settings, project_root_for
    from qshell.errors import InputError

    if args.print_completion:
        from qshell.completions import script

        stdout.write(script(args.print_completion))
        return 0
    root = project_root_for(cwd)
    if args.prompt and args.prompt[0] in SUBCOMMANDS and not args.print:
        from qshell.commands import run_subcommand

        return run_subcommand(args.prompt[0], args.prompt[1:], args, root, environ, stdout)
    if args.max_turns is not None and args.max_turns < 1:
        raise InputError("--max-turns must be at least 1")
    if args.acp:  # before plugins load: nothing they print may reach the JSON stream
        from qshell.acp.handshake import answer_early
        from qshell.acp.streams import claim

        pipes = claim()
        answer_early(pipes.incoming, pipes.outgoing)  # before the rest of start-up
    loaded = assemble_settings(project_root=root, environ=environ, flags=settings_flags(args))
    settings = loaded.settings
    plugins = plugin_host(args, settings, root, environ, notes=loaded.notes)
    opener = _opener(settings, root, environ, stderr, plugins)
    try:
        return _run_front_end(args, settings, opener, stdin, stdout, stderr, environ)
    finally:
        opener.close()


def plugin_host(
    args: argparse.Namespace,
    settings: Any,
    root: Path,
    environ: Mapping[str, str],
    notes: Sequence[str] = (),
) -> Any:
    """The run's gate plugins (`plugin_request`); its startup notes start with `notes`
    (the project settings not applied)."""
    from qshell.compose import open_plugins

    request = plugin_request(args)
    return open_plugins(settings, request, root=root, environ=environ, notes=notes)


def _run_front_end(
    args: argparse.Namespace,
    settings: Any,
    opener: Any,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    environ: dict[str, str],
) -> int:
    from qshell import compose
    from qshell.agent.session import SessionRequest
    from qshell.errors import InputError
    from qshell.ui.terminal import is_tty

    request = SessionRequest(
        continue_latest=args.continue_latest,
        resume_id=args.resume,
        append_system_prompt=args.append_system_prompt,
    )
    if args.acp:
        from qshell.acp import run_acp

        conversations = compose.open_acp(
            settings, request, opener=opener, flags=settings_flags(args)
        )
        gcpause.resume()
        return run_acp(conversations, notes=opener.plugins.startup_notes)
    stdin_is_tty = is_tty(stdin)
    if not args.print and stdin_is_tty:
        from qshell.ui.interactive import run_interactive

        app = compose.open_interactive(
            settings,
            request,
            open_session=opener,
            environ=environ,
            telemetry=opener.plugins.telemetry,
        )
        return run_interactive(
            args,
            app.conversation,
            followup=app.followup,
            history=app.history,
            environ=environ,
            stdin=stdin,
            stdout=stdout,
        )
    prompt = " ".join(args.prompt).strip()
    piped = "" if stdin_is_tty else _read_stdin(stdin, wait_for_first=bool(prompt))
    piped = piped.rstrip("\n") if prompt else piped.strip("\n")
    if not prompt and not piped.strip():
        raise InputError("the prompt is empty: pass it as an argument or on standard input")
    from qshell.ui.print_mode import run_print

    for note in opener.plugins.startup_notes:  # the REPL shows them under its banner
        stderr.write(f"qshell: {note}\n")
    run = compose.open_print(settings, request, open_session=opener, environ=environ)
    gcpause.resume()
    return run_print(
        run,
        prompt,
        piped=piped if piped.strip() else "",
        output_format=args.output_format,
        stdout=stdout,
        stderr=stderr,
    )


def _opener(
    settings: Any, root: Path, environ: Mapping[str, str], stderr: TextIO, plugins: Any
) -> Any:
    """The session factory front-ends use (cli is the composition root), its sessions
    carrying `plugins`; progress notes from building the provider (the local model
    starting) go to stderr."""
    from qshell.sessions import SessionOpener

    def notify(line: str) -> None:
        stderr.write(f"qshell: {line}\n")
        stderr.flush()

    return SessionOpener(settings, root=root, environ=environ, notify=notify, plugins=plugins)


def entry() -> None:
    gcpause.pause()  # each front-end resumes it as it starts (gcpause.py)
    sys.exit(main())
