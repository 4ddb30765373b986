"""Telemetry: private append-only JSONL that never raises into the session."""

from __future__ import annotations

import json
import logging
import stat
import threading
from pathlib import Path

import pytest

from qshell.telemetry import UNKNOWN_PROGRAM, Telemetry, command_shape, read_events


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_record_appends_one_json_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    telemetry = Telemetry(path, clock=lambda: 1717.123456)
    telemetry.record("suggestion", outcome="shown", time_ms=300)
    telemetry.record("speculation", outcome="aborted")
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"event": "suggestion", "timestamp": 1717.123, "outcome": "shown", "time_ms": 300},
        {"event": "speculation", "timestamp": 1717.123, "outcome": "aborted"},
    ]


def test_events_file_is_private_and_its_directories_too(tmp_path: Path) -> None:
    telemetry = Telemetry.for_state_dir(tmp_path / "state")
    telemetry.record("suggestion", outcome="shown")
    path = tmp_path / "state" / "telemetry" / "events.jsonl"
    assert telemetry.path == path
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700


def test_an_existing_file_with_a_loose_mode_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("")
    path.chmod(0o644)
    Telemetry(path).record("suggestion")
    assert mode(path) == 0o600


def test_record_appends_to_what_an_earlier_session_wrote(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first = Telemetry(path)
    first.record("one")
    first.close()
    Telemetry(path).record("two")
    assert [e["event"] for e in read_events(path)] == ["one", "two"]


def test_telemetry_survives_an_unwritable_path_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the state directory should be")
    telemetry = Telemetry.for_state_dir(blocker)
    with caplog.at_level(logging.DEBUG, logger="qshell.telemetry"):
        telemetry.record("suggestion", outcome="shown")
        telemetry.record("suggestion", outcome="ignored")
    assert not telemetry.enabled
    assert len([r for r in caplog.records if "telemetry disabled" in r.message]) == 1


def test_disabled_telemetry_writes_nothing(tmp_path: Path) -> None:
    telemetry = Telemetry.disabled()
    telemetry.record("suggestion", outcome="shown")
    assert not telemetry.enabled
    assert list(tmp_path.iterdir()) == []


def test_values_json_cannot_encode_are_written_as_strings(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    Telemetry(path, clock=lambda: 2.0).record("x", where=tmp_path)
    assert read_events(path) == [{"event": "x", "timestamp": 2.0, "where": str(tmp_path)}]


def test_fields_cannot_overwrite_the_event_name_or_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    Telemetry(path, clock=lambda: 2.0).record("real", timestamp=0, event="fake", ok=True)
    assert read_events(path) == [{"event": "real", "timestamp": 2.0, "ok": True}]


def test_concurrent_records_leave_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    telemetry = Telemetry(path)

    def write(thread: int) -> None:
        for i in range(200):
            telemetry.record("e", thread=thread, i=i, padding="x" * 100)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    events = read_events(path)
    assert len(events) == 800
    assert len(path.read_text().splitlines()) == 800


def test_read_events_skips_torn_and_non_object_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "a"}\n[1, 2]\nnot json\n{"event": "b"}\n{"event": "c", "tor')
    assert read_events(path) == [{"event": "a"}, {"event": "b"}]


def test_read_events_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_events(tmp_path / "nothing.jsonl") == []


def test_observers_see_every_record_written_or_not_and_cannot_break_it(tmp_path: Path) -> None:
    seen: list[tuple[str, dict[str, object]]] = []

    def broken(event: str, fields: object) -> None:
        raise RuntimeError("an observer bug")

    for telemetry in (Telemetry(tmp_path / "events.jsonl"), Telemetry.disabled()):
        telemetry.observe(broken)
        telemetry.observe(lambda event, fields: seen.append((event, dict(fields))))
        telemetry.record("permission", tool="shell", timestamp=1)
    assert seen == [("permission", {"tool": "shell"})] * 2
    assert len(read_events(tmp_path / "events.jsonl")) == 1


@pytest.mark.parametrize("log_text", [False, True])
def test_texts_reach_the_file_only_with_log_text_and_observers_always(
    tmp_path: Path, log_text: bool
) -> None:
    telemetry = Telemetry(tmp_path / "events.jsonl", clock=lambda: 1.0, log_text=log_text)
    seen: list[dict[str, object]] = []
    telemetry.observe(lambda name, fields: seen.append(dict(fields)))
    telemetry.record("permission", texts={"target": "cat .env"}, tool="shell", program="cat")
    (written,) = read_events(tmp_path / "events.jsonl")
    assert written == {
        "event": "permission",
        "timestamp": 1.0,
        "tool": "shell",
        "program": "cat",
        **({"target": "cat .env"} if log_text else {}),
    }
    assert seen == [{"tool": "shell", "program": "cat", "target": "cat .env"}]


@pytest.mark.parametrize(
    ("command", "shape"),
    [
        ("ls", ("ls", 0)),
        ("git push origin main", ("git", 3)),
        ("API_KEY=abc123 /opt/tools/deploy --prod", ("deploy", 1)),
        ("(cd sub && make test)", ("cd", 5)),
        ('echo "unclosed', ("echo", 1)),
        ("$(printf secret) x", (UNKNOWN_PROGRAM, 5)),
        ("A=1 B=2", (None, 0)),
        ("", (None, 0)),
    ],
)
def test_a_commands_shape_is_its_program_and_word_count(
    command: str, shape: tuple[str | None, int]
) -> None:
    assert command_shape(command) == {"program": shape[0], "arg_count": shape[1]}
