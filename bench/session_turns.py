"""The scripted 20-turn session of bench/session.py: the project, the turns, the guesses,
and how the scripted server answers them for each kind of model.

Each turn is a tool round (ls, read_file, grep, glob or edit; 0.35 s to the first token)
then an answer of 150 tokens (0.45 s, then 4 ms a token) that begins with the turn's mark
(its first words, waited for on the screen). After each turn the model predicts the user's
next prompt: right before a seeded choice of turns (`right_turns`), else a plausible wrong
guess of its own (`Turn.guess`), which a speculation plays as a read of the README. Two
kinds of model (MODELS): "folds" ends every answer, when its system prompt asks, with the
prediction and a seeded confidence drawn from one range for a right guess and another for a
wrong one (CALIBRATIONS: partly calibrated, right 0.40–0.95 and wrong 0.10–0.70, so some
wrong guesses outrank some right ones; well calibrated, right 0.55–0.95 and wrong
0.05–0.60); "plain" never ends an answer with a prediction, and answers qshell's separate
suggestion request (its marker in the last user text) with the bare words of its guess for
the newest prompt it saw, no confidence. Values and pure functions, and `script`, which
only adds rules to a server.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from bench.cost import ANSWER_LATENCY, ANSWER_TOKENS, SUGGESTION_LATENCY, TOOL_LATENCY, edit_args
from bench.repl_session import PROJECT_FILES
from bench.scripted import after_call, asked_to_predict, asks, filler, suggestion_after
from qshell.agent.prediction import CLOSE, OPEN
from qshell.followup.suggestion import SUGGESTION_MARKER
from tests.fakes.llm_server import Reply, ScriptedLLMServer, ToolCallSpec

MODELS = {
    "folds": "folds its guess into the answer, with a partly calibrated confidence",
    "plain": "gives neither fold nor confidence (qshell asks for the guess apart)",
}
# where a right prediction's confidence is drawn from, and a wrong one's, by how well the
# model's confidence tells them apart
CALIBRATIONS = {
    "partly": ((0.40, 0.95), (0.10, 0.70)),  # overlapping over 0.40–0.70
    "well": ((0.55, 0.95), (0.05, 0.60)),  # overlapping over 0.55–0.60 only
}


@dataclass(frozen=True)
class Turn:
    prompt: str
    call: ToolCallSpec
    mark: str  # the answer's first words, to wait for on the screen
    guess: str  # the wrong prediction of this prompt (what the model guesses instead)


def read(path: str) -> ToolCallSpec:
    return ToolCallSpec("read_file", {"path": path})


def grep(pattern: str) -> ToolCallSpec:
    return ToolCallSpec("grep", {"pattern": pattern})


def edit(path: str, old: str, new: str) -> ToolCallSpec:
    return ToolCallSpec("edit", edit_args(path, old, new))


FILES = {
    **PROJECT_FILES,
    "util.py": "def slugify(text):\n    return text.lower().replace(' ', '-')\n\n\n"
    "def shout(text: str) -> str:\n    return text.upper()  # TODO: keep punctuation\n",
    "config.py": "import os\n\nDEFAULT_NAME = 'world'  # TODO: read a file too\n\n\n"
    "def name() -> str:\n    return os.environ.get('NAME', DEFAULT_NAME)  # TODO: validate\n",
}
TURNS = (
    Turn("what is in this project", ToolCallSpec("ls", {}), "Six files make up", ""),
    Turn("show me hello.py", read("hello.py"), "It defines greet", "show me app.py first"),
    Turn("where is greet used", grep("greet"), "Two places call", "explain greet in detail"),
    Turn(
        "add a docstring to greet",
        edit("hello.py", "-> str:\n", '-> str:\n    """Say hello."""\n'),
        "The docstring is in",
        "rename greet to welcome",
    ),
    Turn("now show me app.py", read("app.py"), "The app loops", "show me the test of greet"),
    Turn(
        "make app.py shout the greeting",
        edit("app.py", "print(greet(user))", "print(greet(user).upper())"),
        "It shouts now",
        "explain how app.py loads its users",
    ),
    Turn(
        "check the test still matches",
        read("tests/test_hello.py"),
        "The test still holds",
        "does anything else print greetings",
    ),
    Turn(
        "mention greet in the README",
        edit("README.md", "benchmark.\n", "benchmark.\nSee greet.\n"),
        "The README names",
        "show me the README",
    ),
    Turn(
        "what does util.py offer", read("util.py"), "util.py has two helpers", "what else is there"
    ),
    Turn("find every TODO", grep("TODO"), "Three TODOs are left", "is shout used anywhere"),
    Turn(
        "list the python files",
        ToolCallSpec("glob", {"pattern": "**/*.py"}),
        "There are five Python files",
        "fix the TODO in util.py",
    ),
    Turn("show me config.py", read("config.py"), "config.py reads one setting", "show me util.py"),
    Turn(
        "rename DEFAULT_NAME to FALLBACK_NAME in config.py",
        edit("config.py", "DEFAULT_NAME = 'world'", "FALLBACK_NAME = 'world'"),
        "The constant is renamed",
        "explain the NAME variable",
    ),
    Turn(
        "where is DEFAULT_NAME still used",
        grep("DEFAULT_NAME"),
        "One use is left",
        "show me config.py again",
    ),
    Turn(
        "add a type hint to slugify in util.py",
        edit("util.py", "def slugify(text):", "def slugify(text: str) -> str:"),
        "slugify is typed now",
        "where is DEFAULT_NAME defined",
    ),
    Turn(
        "show me the test again",
        read("tests/test_hello.py"),
        "The test checks one name",
        "explain what slugify does",
    ),
    Turn(
        "add a test for bob",
        edit(
            "tests/test_hello.py",
            "'hello, ada'\n",
            "'hello, ada'\n    assert greet('bob') == 'hello, bob'\n",
        ),
        "A second assertion checks",
        "what does the test import",
    ),
    Turn("what changed in hello.py", read("hello.py"), "hello.py now has", "is the test complete"),
    Turn("search for print calls", grep("print"), "One print call", "show me hello.py again"),
    Turn(
        "summarise the project in two lines",
        read("README.md"),
        "The project greets users",
        "where else could greet be used",
    ),
)
LAST_GUESS = "what should I do next"  # predicted after turn 20, never sent
GUESS_CALL = read("README.md")
PROMPTS = frozenset({t.prompt for t in TURNS} | {t.guess for t in TURNS[1:]} | {LAST_GUESS})


def right_turns(fraction: float, seed: int) -> list[int]:
    """Which turns (numbered from 1; turn 1 has no suggestion) the suggestion gets right."""
    suggested = range(2, len(TURNS) + 1)
    return sorted(random.Random(seed).sample(suggested, round(fraction * len(suggested))))


def predictions(right: list[int]) -> list[str]:
    """What the answer of each turn predicts: the next prompt when it is right, else a guess."""
    nexts = [TURNS[n].prompt if n + 1 in right else TURNS[n].guess for n in range(1, len(TURNS))]
    return [*nexts, LAST_GUESS]


def confidences(right: list[int], seed: int, calibration: str = "partly") -> list[float]:
    """The confidence each turn's prediction line gives (seeded): from the calibration's
    right range when the prediction is right, else from its wrong range."""
    rng = random.Random(seed + 1)
    right_span, wrong_span = CALIBRATIONS[calibration]
    spans = [right_span if n + 1 in right else wrong_span for n in range(1, len(TURNS))]
    return [round(rng.uniform(*span), 2) for span in [*spans, wrong_span]]


def script(server: ScriptedLLMServer, model: str, right: list[int], sure: list[float]) -> None:
    """Every prompt a request may carry — the turns' and the wrong guesses — answered by
    content: a tool round, then an answer; the "folds" model ends it with the prediction and
    its confidence `sure` when asked for one, the "plain" one answers suggestion requests."""
    folds = model == "folds"
    nexts = zip(TURNS, predictions(right), sure, strict=True)
    for index, (turn, nxt, confidence) in enumerate(nexts):
        folded = nxt if folds else None
        answer(server, f"t{index}", turn.prompt, turn.call, turn.mark, folded, confidence)
        if not folds:
            words = Reply.text(nxt, latency=SUGGESTION_LATENCY)
            server.add_rule(suggestion_after(turn.prompt, PROMPTS), words)
    guesses = [t.guess for t in TURNS[1:]] + [LAST_GUESS]
    for index, guess in enumerate(guesses):
        empty = "" if folds else None
        answer(server, f"g{index}", guess, GUESS_CALL, f"About {guess}", empty, None)
    # any other suggestion request (after a wrong guess's turn; for "folds", after an answer
    # that carried no prediction) gets no guess
    server.add_rule(lambda r: SUGGESTION_MARKER in r.last_user_text, Reply.text(""))


def answer(
    server: ScriptedLLMServer,
    name: str,
    prompt: str,
    call: ToolCallSpec,
    mark: str,
    folded: str | None,
    confidence: float | None,
) -> None:
    """The rules of one prompt's turn; `folded`: the prediction its answer ends with when
    the system prompt asks for one (None: never), with `confidence` (None: no attribute)."""
    called = ToolCallSpec(call.name, call.arguments, id=f"call_{name}")
    text = filler(mark, ANSWER_TOKENS)
    if folded is not None:
        tag = OPEN if confidence is None else f'<next-prompt confidence="{confidence:.2f}">'
        folding = Reply.text(f"{text}\n\n{tag}{folded}{CLOSE}", latency=ANSWER_LATENCY)
        server.add_rule(after_call(called.id or "") & asked_to_predict, folding)
    server.add_rule(after_call(called.id or ""), Reply.text(text, latency=ANSWER_LATENCY))
    server.add_rule(asks(prompt), Reply.tool_calls([called], latency=TOOL_LATENCY))
