"""`qshell stats` and `qshell plugins`, run in-process through cli.main."""

from __future__ import annotations

import io
import json

from qshell.cli import main
from qshell.telemetry import Telemetry


def run(*argv: str, cwd) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), stdout=out, stderr=io.StringIO(), cwd=cwd)
    return code, out.getvalue()


def test_stats_summarises_suggestion_outcomes_from_local_telemetry(tmp_path, isolated_home):
    telemetry = Telemetry.for_state_dir(isolated_home / "qshell" / "state")
    for outcome in ["shown", "accepted", "shown", "ignored", "suppressed", "filled"]:
        telemetry.record("suggestion", outcome=outcome)
    code, text = run("stats", cwd=tmp_path)
    assert code == 0
    assert "shown 2, accepted 1 (50% of shown), filled 1, ignored 1, suppressed 1" in text
    code, text = run("stats", "--json", cwd=tmp_path)
    assert json.loads(text)["suggestions"] == {
        "shown": 2,
        "accepted": 1,
        "ignored": 1,
        "suppressed": 1,
        "filled": 1,
    }


def test_stats_with_no_sessions_and_no_telemetry(tmp_path):
    code, text = run("stats", cwd=tmp_path)
    assert code == 0 and text.startswith(f"qshell stats for {tmp_path}\n")
    rows = dict(line.split("  ", 1) for line in text.splitlines()[1:])
    assert rows["sessions"].strip() == "0" and rows["cache hit rate"].strip() == "n/a"
    assert rows["suggestions (all projects)"].strip().startswith("shown 0, accepted 0")


def test_a_subcommand_with_arguments_is_bad_input(tmp_path):
    assert run("stats", "extra", cwd=tmp_path)[0] == 42


def test_plugins_json_lists_no_plugins_when_loading_is_off(tmp_path):
    code, text = run("plugins", "--json", cwd=tmp_path)
    assert code == 0 and json.loads(text) == []
