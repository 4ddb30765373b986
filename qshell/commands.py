"""The reserved subcommands: `qshell stats` and `qshell plugins`.

`stats` summarises this project's session transcripts, the local telemetry and the
decision log (qshell/stats.py); `plugins` lists the gate plugins a run here loads
(importing them, as a run would), their source and hooks, and why any failed. They write to the given stdout; `--json` gives
machine-readable output. Main thread.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from qshell.arguments import plugin_request
from qshell.dirs import Dirs
from qshell.errors import InputError


def run_subcommand(
    name: str,
    rest: Sequence[str],
    args: argparse.Namespace,
    root: Path,
    environ: Mapping[str, str],
    stdout: TextIO,
) -> int:
    if rest:
        raise InputError(f"`qshell {name}` takes no arguments (to send a prompt, use -p)")
    if name == "stats":
        from qshell.agent.transcript import transcripts_dir
        from qshell.stats import as_json, render, report

        state = Dirs.from_environ(environ).state
        found = report(state, transcripts_dir(state, root), root)
        stdout.write(json.dumps(as_json(found)) + "\n" if args.json else render(found))
        return 0
    if name == "doctor":
        from qshell.doctor import doctor_report

        stdout.write("\n".join(doctor_report(root, environ)) + "\n")
        return 0
    return list_plugins(args, root, environ, stdout)


def list_plugins(
    args: argparse.Namespace, root: Path, environ: Mapping[str, str], stdout: TextIO
) -> int:
    """`qshell plugins`: the plugins a run here loads, in the order they are consulted,
    with their source and hooks, and those that failed to load with why."""
    from qshell.compose import open_plugins
    from qshell.config import load_settings

    settings = load_settings(project_root=root, environ=environ)
    infos = open_plugins(settings, plugin_request(args), root=root, environ=environ).infos
    if args.json:
        stdout.write(json.dumps([asdict(i) for i in infos]) + "\n")
        return 0
    if not infos:
        stdout.write("no plugins loaded\n")
    for info in infos:
        hooks = ", ".join(info.hooks) or "no hooks"
        said = f"skipped ({info.error})" if info.error else hooks
        stdout.write(f"{info.name} ({info.source} {info.location}): {said}\n")
    return 0
