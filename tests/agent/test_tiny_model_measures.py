"""What a session does for a tiny local model: a toolless last round, compact tools and
prompt, one shared provider per run, and a usage line that admits what it does not know."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, Field

from qshell import sessions
from qshell.agent.events import Event, FailureKind, TurnFailed, TurnFinished
from qshell.agent.loop import run_turn
from qshell.agent.prompt import BASE_PROMPT, COMPACT_PROMPT, CONCISE_PROMPT, build_system_prompt
from qshell.agent.session import Session, SessionRequest, check_history
from qshell.cancel import CancelToken
from qshell.config import ApprovalMode, LocalSettings, Settings, load_settings
from qshell.llm.messages import Usage
from qshell.llm.openai import OpenAIProvider
from qshell.permissions.runner import MainToolRunner
from qshell.tools import default_tools
from qshell.tools.base import Kind, tool_spec
from qshell.ui.render import usage_line
from tests.agent.scripted import ScriptedProvider, session_for
from tests.e2e.helpers import provider_env
from tests.fakes.llm_server import Match, Reply, ScriptedLLMServer, ToolCallSpec, always

# ------------------------------------------------------------ the toolless round


def session_over(
    provider: object, root: Path, *, max_turns: int, final_round_without_tools: bool
) -> Session:
    return session_for(
        provider,
        root,
        default_tools(),
        model="m1",
        max_turns=max_turns,
        final_round_without_tools=final_round_without_tools,
    )


def test_only_the_last_round_of_a_turn_is_requested_without_tools(tmp_path: Path) -> None:
    session = session_over(
        ScriptedProvider([]), tmp_path, max_turns=3, final_round_without_tools=True
    )
    offered = [bool(session.request(round_index=k).tools) for k in range(4)]
    assert offered == [True, True, False, False]
    assert session.request(round_index=0).tools == session.tool_specs


def test_without_the_measure_every_round_offers_tools(tmp_path: Path) -> None:
    session = session_over(
        ScriptedProvider([]), tmp_path, max_turns=3, final_round_without_tools=False
    )
    assert all(session.request(round_index=k).tools for k in range(3))


def test_a_one_round_turn_with_the_measure_offers_no_tools_at_all(tmp_path: Path) -> None:
    session = session_over(
        ScriptedProvider([]), tmp_path, max_turns=1, final_round_without_tools=True
    )
    assert session.request(round_index=0).tools == []


OFFERS_NO_TOOLS = Match(lambda request: not request.tool_names, "offers no tools")


def drive(session: Session) -> list[Event]:
    runner = MainToolRunner(ApprovalMode.YOLO, interactive=False)
    return list(run_turn(session, "what is here?", runner, CancelToken()))


def script_a_model_that_always_calls_tools(server: ScriptedLLMServer) -> None:
    server.add_rule(OFFERS_NO_TOOLS, Reply.text("Here is a.txt, and that is all."))
    server.add_rule(always(), Reply.tool_calls([ToolCallSpec("ls", {"path": "."})]))


def drive_a_tool_calling_model(
    server: ScriptedLLMServer, tmp_path: Path, *, final_round_without_tools: bool
) -> tuple[Session, list[Event]]:
    """One turn of three rounds over `server` scripted to always call tools."""
    script_a_model_that_always_calls_tools(server)
    provider = OpenAIProvider(server.openai_base_url, server.api_key)
    session = session_over(
        provider, tmp_path, max_turns=3, final_round_without_tools=final_round_without_tools
    )
    try:
        return session, drive(session)
    finally:
        provider.close()


def test_a_model_that_keeps_calling_tools_answers_in_the_toolless_last_round(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    session, events = drive_a_tool_calling_model(
        llm_server, tmp_path, final_round_without_tools=True
    )
    requests = llm_server.requests
    assert [bool(r.tool_names) for r in requests] == [True, True, False]
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert finished.text == "Here is a.txt, and that is all."
    assert finished.rounds == 3
    assert check_history(session.history) == []
    assert [m.role for m in session.history] == ["user"] + ["assistant", "user"] * 2 + ["assistant"]


def test_without_the_measure_the_same_model_runs_out_of_rounds(
    llm_server: ScriptedLLMServer, tmp_path: Path
) -> None:
    _, events = drive_a_tool_calling_model(llm_server, tmp_path, final_round_without_tools=False)
    assert [bool(r.tool_names) for r in llm_server.requests] == [True, True, True]
    assert isinstance(events[-1], TurnFailed) and events[-1].kind is FailureKind.MAX_TURNS


# ------------------------------------------------------------- compact tool specs


class _DocArgs(BaseModel):
    path: str = Field(description="Which file to read, relative to the root.")
    title: str = Field("", description="A field that happens to be called title.")
    description: int | None = Field(None, description="And one called description.")


class _DocTool:
    name: ClassVar[str] = "doc"
    kind: ClassVar[Kind] = Kind.READ
    description: ClassVar[str] = (
        "Read a document.  It returns the text\n with line numbers. Use it before editing."
    )
    Args: ClassVar[type[BaseModel]] = _DocArgs


def _keys(schema: object) -> set[str]:
    """Every key used anywhere in a JSON schema, property names excluded."""
    if isinstance(schema, dict):
        found: set[str] = set()
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                for inner in value.values():
                    found |= _keys(inner)
            else:
                found.add(key)
                found |= _keys(value)
        return found
    if isinstance(schema, list):
        return set().union(*(_keys(item) for item in schema))
    return set()


def test_a_compact_tool_spec_keeps_the_first_sentence_and_drops_descriptions_and_titles() -> None:
    full = tool_spec(_DocTool())  # type: ignore[arg-type]
    compact = tool_spec(_DocTool(), compact=True)  # type: ignore[arg-type]
    assert compact.name == "doc"
    assert compact.description == "Read a document."
    assert "description" in _keys(full.parameters) and "title" in _keys(full.parameters)
    assert "description" not in _keys(compact.parameters)
    assert "title" not in _keys(compact.parameters)


def test_a_compact_tool_spec_keeps_types_required_and_properties_named_like_keywords() -> None:
    schema = tool_spec(_DocTool(), compact=True).parameters  # type: ignore[arg-type]
    assert schema["type"] == "object"
    assert schema["required"] == ["path"]
    assert list(schema["properties"]) == ["path", "title", "description"]
    assert schema["properties"]["path"] == {"type": "string"}
    assert schema["properties"]["title"] == {"default": "", "type": "string"}
    assert schema["properties"]["description"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]


def test_a_one_sentence_description_is_kept_whole_on_one_line() -> None:
    class Flat(_DocTool):
        description: ClassVar[str] = "List the entries\n   of one directory"

    assert tool_spec(Flat(), compact=True).description == "List the entries of one directory"  # type: ignore[arg-type]


@pytest.mark.parametrize("tool", default_tools(), ids=lambda tool: tool.name)
def test_every_real_tool_has_a_shorter_compact_spec_with_the_same_arguments(tool) -> None:
    full, compact = tool_spec(tool), tool_spec(tool, compact=True)
    assert compact.description and full.description.startswith(compact.description[:-1])
    assert len(str(compact.parameters)) <= len(str(full.parameters))
    assert compact.parameters["properties"].keys() == full.parameters["properties"].keys()
    assert compact.parameters.get("required") == full.parameters.get("required")


# ------------------------------------------------------------------ compact prompt


def test_the_compact_system_prompt_is_shorter_and_still_names_the_project_root(
    tmp_path: Path,
) -> None:
    normal = build_system_prompt(tmp_path)
    compact = build_system_prompt(tmp_path, compact=True)
    assert len(compact) < len(normal)
    assert compact.startswith(COMPACT_PROMPT) and normal.startswith(BASE_PROMPT)
    assert f"project root: {tmp_path}" in compact


def test_the_compact_prompt_clips_project_instructions_harder(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("y" * 5000)
    assert "y" * 5000 in build_system_prompt(tmp_path)
    compact = build_system_prompt(tmp_path, compact=True, extra="Be terse.")
    assert "y" * 2000 in compact and "y" * 2001 not in compact
    assert compact.rstrip().endswith("Be terse.")


# --------------------------------------------------------------- session opening


def environ_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"QSHELL_HOME": str(tmp_path / "qshell-home"), "HOME": str(tmp_path), **extra}


def project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    return root


@contextmanager
def opened(settings: Settings, root: Path, environ: dict[str, str]) -> Iterator[Session]:
    """A session opened on `settings` over a scripted provider, closed on leaving."""
    session = sessions.open_session(
        settings, SessionRequest(), root=root, environ=environ, provider=ScriptedProvider([])
    )
    try:
        yield session
    finally:
        session.close()


def close_all(sessions: Iterable[Session]) -> None:
    for session in sessions:
        session.close()


def test_sessions_opened_by_one_opener_share_one_provider_that_close_releases(
    llm_server: ScriptedLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    environ = environ_for(tmp_path, **provider_env(llm_server, "openai"))
    opener = sessions.SessionOpener(
        load_settings(project_root=root, environ=environ), root=root, environ=environ
    )
    first = opener(SessionRequest())
    second = opener(SessionRequest())
    try:
        assert first.id != second.id
        assert first.provider is second.provider is opener.provider
        assert isinstance(opener.provider, OpenAIProvider)
        assert opener.provider.base_url == llm_server.openai_base_url
        llm_server.add_rule(always(), Reply.text("hello"))
        events = drive(second)
        assert isinstance(events[-1], TurnFinished) and events[-1].text == "hello"
    finally:
        close_all([first, second])
    closes: list[str] = []
    original = opener.provider.close

    def close() -> None:
        closes.append("x")
        original()

    monkeypatch.setattr(opener.provider, "close", close)
    opener.close()
    assert closes == ["x"]


def test_closing_an_opener_that_never_opened_a_session_does_nothing(tmp_path: Path) -> None:
    root = project(tmp_path)
    environ = environ_for(tmp_path, OPENAI_API_KEY="k")
    opener = sessions.SessionOpener(
        load_settings(project_root=root, environ=environ), root=root, environ=environ
    )
    opener.close()
    assert opener.provider is None


def test_a_session_on_the_bundled_local_model_gets_every_tiny_model_measure(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    settings = Settings(provider="local", max_turns=50, local=LocalSettings(context_size=4096))
    with opened(settings, root, environ_for(tmp_path)) as session:
        assert session.options.max_turns == settings.local.max_rounds
        assert session.options.max_tokens == settings.local.max_tokens < settings.max_tokens
        assert session.options.compact_tools and session.options.final_round_without_tools
        assert session.options.tools_by_prompt
        assert session.system_prompt.startswith(COMPACT_PROMPT)
        assert session.options.context_window == 4096
        read_file = next(s for s in session.tool_specs if s.name == "read_file")
        assert read_file.description == "Read a text file."
        assert session.request(round_index=session.options.max_turns - 1).tools == []


def test_a_local_session_on_a_configured_model_keeps_the_full_prompt_tools_and_rounds(
    tmp_path: Path,
) -> None:
    root = project(tmp_path)
    gguf = tmp_path / "big.gguf"
    gguf.write_bytes(b"GGUF")
    settings = Settings(
        provider="local",
        max_turns=20,
        local=LocalSettings(model_path=str(gguf), context_size=16384),
    )
    with opened(settings, root, environ_for(tmp_path)) as session:
        assert session.model == "big"
        assert session.options.max_turns == 20
        assert session.options.max_tokens == settings.max_tokens
        assert not session.options.compact_tools and not session.options.final_round_without_tools
        assert not session.options.tools_by_prompt
        assert session.system_prompt.startswith(BASE_PROMPT)
        assert session.options.context_window == 16384
        assert session.request(round_index=19).tools


def test_a_session_on_a_remote_provider_gets_no_tiny_model_measure(tmp_path: Path) -> None:
    root = project(tmp_path)
    environ = environ_for(tmp_path, OPENAI_API_KEY="k")
    settings = load_settings(project_root=root, environ=environ)
    with opened(settings, root, environ) as session:
        assert session.options.max_turns == settings.max_turns
        assert session.options.max_tokens == settings.max_tokens
        assert not session.options.compact_tools and not session.options.final_round_without_tools
        assert not session.options.tools_by_prompt
        assert session.options.context_window == settings.context_window
        assert session.request().tools == session.tool_specs


def test_a_configured_model_set_as_small_gets_the_tiny_model_measures(tmp_path: Path) -> None:
    root = project(tmp_path)
    gguf = tmp_path / "other-small.gguf"
    gguf.write_bytes(b"GGUF")
    local = LocalSettings(model_path=str(gguf), small_model=True)
    with opened(Settings(provider="local", local=local), root, environ_for(tmp_path)) as session:
        assert session.model == "other-small"
        assert session.options.max_turns == local.max_rounds
        assert session.options.compact_tools and session.options.final_round_without_tools
        assert session.options.tools_by_prompt
        assert session.system_prompt.startswith(COMPACT_PROMPT)


# --------------------------------------------------------------------- usage line


def test_the_usage_line_says_not_reported_when_the_server_gave_no_usage() -> None:
    line = usage_line(Usage(known=False), 2, sep=" · ")
    assert line == "tokens: not reported by the server · 2 rounds"


def test_the_usage_line_shows_counts_when_only_some_rounds_were_reported() -> None:
    partial = Usage(prompt_tokens=1200, completion_tokens=30) + Usage(known=False)
    assert usage_line(partial, 1, sep=" · ").startswith("tokens: 1,200 in")


def test_a_fork_after_a_toolless_last_round_still_offers_tools(tmp_path: Path) -> None:
    """The main turn's last round went out without tools (by design); a speculation forked
    from it must still offer them, and drop them only in its own last round."""
    from qshell.llm.messages import Message
    from tests.agent.scripted import call
    from tests.agent.test_loop import drive, make_session, yolo

    (tmp_path / "a.txt").write_text("x")
    listing = [Message.assistant("", [call("ls", "{}", f"l{i}")]) for i in (1, 2)]
    session, provider = make_session(
        tmp_path,
        [*listing, Message.assistant("done")],
        default_tools(),
        max_turns=3,
        final_round_without_tools=True,
    )
    drive(session, "go", yolo())
    assert provider.requests[-1].tools == []
    fork = session.fork(max_turns=2)
    fork.append(Message.user("next"))
    assert fork.request(round_index=0).tools == session.tool_specs
    assert fork.request(round_index=1).tools == []


def test_concise_replies_adds_its_instruction_except_to_the_compact_prompt(tmp_path) -> None:
    assert CONCISE_PROMPT in build_system_prompt(tmp_path)  # the default
    assert CONCISE_PROMPT not in build_system_prompt(tmp_path, concise=False)
    # the small model's prompt already asks for brief answers, in fewer tokens
    assert CONCISE_PROMPT not in build_system_prompt(tmp_path, compact=True, concise=True)
