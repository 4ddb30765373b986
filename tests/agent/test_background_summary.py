"""D3 in the loop: a round after a batch whose every result is terminal is announced with
`SummaryStarted` — only in a session that summarizes in background (interactive sessions
with `summarizeInBackground`), never when a result is not terminal or failed, when D1
ends the turn without a round, when no round follows, or on a speculation's fork."""

from __future__ import annotations

from typing import Any

from qshell import compose, sessions
from qshell.agent.events import (
    RoundFinished,
    SummaryStarted,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFailed,
    TurnFinished,
)
from qshell.agent.session import SessionRequest
from qshell.config import load_settings
from qshell.latency.directives import Directives
from qshell.llm.messages import Message
from qshell.tools.base import Kind, ToolContext, ToolResult
from qshell.tools.registered import adapt
from tests.agent.scripted import NoteArgs, RecordingTool, TerminalTool, call
from tests.agent.test_loop import drive, make_session, yolo


def _calls(*specs: tuple[str, str]) -> Message:
    return Message.assistant(
        "", [call(name, f'{{"text": "{text}"}}', f"c{i}") for i, (name, text) in enumerate(specs)]
    )


def _session(tmp_path, steps, tools, *, on: bool = True, **kw):
    return make_session(tmp_path, steps, tools, summarizes_in_background=on, **kw)


def test_summary_started_comes_between_the_terminal_results_and_the_summary_round(tmp_path):
    steps = [_calls(("cat", "a"), ("cat", "b")), Message.assistant("both say hi")]
    session, provider = _session(tmp_path, steps, [TerminalTool("cat")])
    events = drive(session, "show a and b", yolo())
    kinds = [type(e) for e in events]
    assert kinds == [
        RoundFinished,
        ToolStarted,
        ToolStarted,
        ToolFinished,
        ToolFinished,
        SummaryStarted,
        TextDelta,
        RoundFinished,
        TurnFinished,
    ]
    started = next(e for e in events if isinstance(e, SummaryStarted))
    summary_round = [e for e in events if isinstance(e, RoundFinished)][-1]
    assert started.round == summary_round.round == 2
    assert events[-1] == TurnFinished(text="both say hi", usage=events[-1].usage, rounds=2)
    assert len(provider.requests) == 2


def test_one_result_that_is_not_terminal_means_no_summary_started(tmp_path):
    steps = [_calls(("cat", "a"), ("note", "b")), Message.assistant("done")]
    tools = [TerminalTool("cat"), RecordingTool("note", Kind.READ)]
    session, _ = _session(tmp_path, steps, tools)
    events = drive(session, "go", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "done"


def test_a_failed_result_is_for_the_model_to_read_so_no_summary_started(tmp_path):
    steps = [_calls(("cat", "fail")), Message.assistant("it broke")]
    session, _ = _session(tmp_path, steps, [TerminalTool("cat")])
    events = drive(session, "go", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)


def test_the_setting_off_means_no_summary_started(tmp_path):
    steps = [_calls(("cat", "a")), Message.assistant("hi")]
    session, _ = _session(tmp_path, steps, [TerminalTool("cat")], on=False)
    events = drive(session, "go", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "hi"


def test_when_d1_skips_the_round_there_is_no_summary_to_announce(tmp_path):
    session, provider = _session(tmp_path, [_calls(("ls", "a"))], [TerminalTool("ls", skip=True)])
    events = drive(session, "go", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)
    end = events[-1]
    assert isinstance(end, TurnFinished) and end.skipped_round and len(provider.requests) == 1


def test_no_summary_started_when_max_turns_leaves_no_round(tmp_path):
    session, _ = _session(tmp_path, [_calls(("cat", "a"))], [TerminalTool("cat")], max_turns=1)
    events = drive(session, "go", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)
    assert isinstance(events[-1], TurnFailed)


def test_a_fork_never_summarizes_in_background(tmp_path):
    session, _ = _session(tmp_path, [], [TerminalTool("cat")])
    assert session.options.summarizes_in_background
    assert not session.fork().options.summarizes_in_background


def _settings(tmp_path, value: str):
    root = (tmp_path / "project").resolve()
    root.mkdir(exist_ok=True)
    environ = {
        "QSHELL_HOME": str(tmp_path / "qshell-home"),
        "HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "k",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_MODEL": "m1",
        "QSHELL_SUMMARIZE_IN_BACKGROUND": value,
    }
    return load_settings(project_root=root, environ=environ), root, environ


def test_only_interactive_sessions_with_the_setting_summarize_in_background(tmp_path):
    settings, root, environ = _settings(tmp_path, "true")
    opener = sessions.SessionOpener(settings, root=root, environ=environ)
    interactive = compose.open_interactive(
        settings, SessionRequest(), open_session=opener, environ=environ
    )
    assert interactive.conversation.session.options.summarizes_in_background
    interactive.conversation.clear()  # a new session of the same conversation keeps it
    assert interactive.conversation.session.options.summarizes_in_background
    printed = compose.open_print(settings, SessionRequest(), open_session=opener, environ=environ)
    assert not printed.session.options.summarizes_in_background
    settings, root, environ = _settings(tmp_path, "false")
    opener = sessions.SessionOpener(settings, root=root, environ=environ)
    interactive = compose.open_interactive(
        settings, SessionRequest(), open_session=opener, environ=environ
    )
    assert not interactive.conversation.session.options.summarizes_in_background


def test_a_prompt_asking_for_more_work_means_no_summary_started(tmp_path):
    # the round after terminal results is only announced when it is expected to sum up:
    # an action asked for (English or Chinese), or an earlier error, foretells a tool call
    for prompt in ("show a, then fix the typo in it", "显示 a 然后修复它"):
        steps = [_calls(("cat", "a")), Message.assistant("fixed")]
        session, _ = _session(tmp_path, steps, [TerminalTool("cat")])
        events = drive(session, prompt, yolo())
        assert not any(isinstance(e, SummaryStarted) for e in events), prompt
        assert isinstance(events[-1], TurnFinished)


class _PluginCat:
    name = "pcat"
    kind = Kind.READ
    description = "a plugin's terminal read"
    Args = NoteArgs

    def accesses(self, args: Any, ctx: ToolContext) -> list[Any]:
        return []

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        return ToolResult(llm_content=f"plugin {args.text}", result_is_terminal=True)


def test_a_plugin_tools_terminal_result_counts_only_when_allowlisted(tmp_path):
    tool = adapt("p", _PluginCat())
    steps = [_calls(("pcat", "a")), Message.assistant("it says a")]
    session, _ = _session(tmp_path, steps, [tool])
    events = drive(session, "show a", yolo())
    assert not any(isinstance(e, SummaryStarted) for e in events)

    allowed = Directives.of(always_summarize=False, allowlist=["pcat"])
    steps = [_calls(("pcat", "a")), Message.assistant("it says a")]
    session, _ = _session(tmp_path, steps, [tool], directives=allowed)
    events = drive(session, "show a", yolo())
    assert any(isinstance(e, SummaryStarted) for e in events)


def test_a_terminal_command_is_a_read_so_its_summary_is_announced(tmp_path):
    # the shell marks only a plain cat / git status / git log terminal: its kind (execute)
    # does not make the batch a write
    steps = [_calls(("sh", "git log")), Message.assistant("three commits")]
    session, _ = _session(tmp_path, steps, [TerminalTool("sh", Kind.EXECUTE)])
    events = drive(session, "what changed lately?", yolo())
    assert any(isinstance(e, SummaryStarted) for e in events)
