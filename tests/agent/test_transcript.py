"""Transcripts: private files, whole-line records, resume gives the history the model saw."""

from __future__ import annotations

import stat

import pytest

from qshell.agent import transcript as transcripts
from qshell.errors import InputError
from qshell.llm.messages import Message, ToolCall, ToolResultBlock


def test_a_transcript_round_trips_messages_and_the_system_prompt(tmp_path):
    directory = tmp_path / "projects" / "p"
    t = transcripts.Transcript.create(directory, "abc", {"system_prompt": "SYS"})
    messages = [
        Message.user("hi"),
        Message.assistant("", [ToolCall(id="c1", name="ls", arguments="{}")]),
        Message(role="user", content=[ToolResultBlock(tool_call_id="c1", content="a\nb")]),
        Message.assistant("done"),
    ]
    for m in messages:
        t.write_message(m)
    t.close()
    loaded = transcripts.load(directory / "abc.jsonl")
    assert loaded.system_prompt == "SYS" and loaded.messages == messages


def test_transcript_files_and_directories_are_private(tmp_path):
    directory = tmp_path / "projects" / "p"
    t = transcripts.Transcript.create(directory, "abc", {})
    t.close()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE((directory / "abc.jsonl").stat().st_mode) == 0o600


def test_a_torn_last_line_is_skipped_on_load(tmp_path):
    t = transcripts.Transcript.create(tmp_path, "abc", {})
    t.write_message(Message.user("hi"))
    t.close()
    with (tmp_path / "abc.jsonl").open("a") as handle:
        handle.write('{"type": "message", "message": {"role": "assis')
    assert transcripts.load(tmp_path / "abc.jsonl").messages == [Message.user("hi")]


def test_find_picks_the_latest_session_or_a_named_one(tmp_path):
    import os

    for i, name in enumerate(["old", "new"]):
        transcripts.Transcript.create(tmp_path, name, {}).close()
        os.utime(tmp_path / f"{name}.jsonl", (1000 + i, 1000 + i))
    assert transcripts.find(tmp_path, None).stem == "new"
    assert transcripts.find(tmp_path, "old").stem == "old"
    with pytest.raises(InputError):
        transcripts.find(tmp_path, "missing")
    with pytest.raises(InputError):
        transcripts.find(tmp_path, "../etc/passwd")
    with pytest.raises(InputError):
        transcripts.find(tmp_path / "empty", None)
