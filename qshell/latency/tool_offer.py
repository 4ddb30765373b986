"""Which tools a small local model is offered in a turn, decided from the turn's prompt.

A model of a hundred million parameters that is offered tools calls one whatever it is
asked: "say hello" becomes a write_file call. So for such a model (the bundled offline
default, `local.smallModel`) qshell reads the prompt and offers only the kinds of tool it
could need: none for a greeting or a general question; the read tools when it names a path
or an identifier (`count_words`, `parseArgs`, `main()`) or asks about the project's files;
the search tools when it asks about the project without naming an existing file, or asks
to find something in it; the edit tools when it asks for a change to a path or to the
project; the shell when it asks to run, build or test something; web_fetch for a URL.
Tools of other kinds come along only when something else is offered. Only the text the
user typed counts, not the `@path` attachments appended to it.

The offered schemas are narrowed too (`offered_specs`): a required `path` is the file a
tool acts on, an optional one the directory it looks in (so it is for qshell's tools).

This is a keyword heuristic, and its limits are deliberate: the words are English (a prompt
in another language gets no tools, and the model answers from what it knows), a question
about the project phrased without any of the words below gets no tools, and a model that
needs a second kind of tool mid-turn does not get it (the offer is decided once per turn).
A larger model never goes through it. Pure apart from `exists` checks of the paths a prompt
names and one listing of the project's top level; safe from any thread.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qshell.llm.messages import ToolSpec
from qshell.tools.base import Kind, Tool


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# words that ask what is there (a listing), and words about what the project holds
LISTING_WORDS = _words("file files folder folders directory directories dir dirs tree list ls")
CONTENT_WORDS = _words(
    "project projects repo repository codebase code source sources module modules package "
    "script scripts readme"
)
PROJECT_WORDS = LISTING_WORDS | CONTENT_WORDS | {"here"}
SEARCH_WORDS = _words(
    "find search grep where locate contain contains containing mention mentions list ls look"
)
CHANGE_WORDS = _words(
    "add append prepend write create edit change modify fix update replace insert delete "
    "remove rename move refactor implement save put rewrite"
)
RUN_WORDS = _words(
    "run runs execute exec test tests pytest build compile install command commands shell "
    "bash git commit lint"
)
EDIT_KINDS = frozenset({Kind.EDIT, Kind.DELETE, Kind.MOVE})
ATTACHMENT_START = re.compile(r"^<(?:file|directory) path=", re.MULTILINE)
ATTACHED_FILE = re.compile(r'^<file path="([^"\n]+)">$', re.MULTILINE)
URL = re.compile(r"\bhttps?://\S", re.IGNORECASE)
WORD = re.compile(r"[a-z0-9_]+")
# a name from code: snake_case, camelCase or a call, `count_words`, `parseArgs`, `main()`
IDENTIFIER = re.compile(
    r"(?<![\w.])(?:_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*|[a-z]+[A-Z][A-Za-z0-9]*"
    r"|[A-Za-z_]\w*\(\))(?![\w.])"
)
# a token with a slash, or a name with an extension: `notes.txt`, `src/app.py`, `./x`
PATH_LIKE = re.compile(r"^(?:[\w.~-]*/[\w./-]*|[\w-][\w.-]*\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*)$")
ABBREVIATION = re.compile(r"[A-Za-z](?:\.[A-Za-z])+")  # e.g., i.e., a.m.: not paths
TOKEN_EDGES = "\"'`()[]{}<>,;:!?*@"
MAX_PATH_CHOICES = 40  # top-level files a pinned `path` argument may name


def typed_text(prompt: str) -> str:
    """The part of a prompt the user typed: attachment blocks start on their own line."""
    found = ATTACHMENT_START.search(prompt)
    return prompt[: found.start()] if found else prompt


def named_paths(text: str) -> list[str]:
    """Tokens of `text` that look like paths (`notes.txt`, `src/`, `./run.sh`), in order."""
    paths: list[str] = []
    for raw in text.split():
        token = raw.strip(TOKEN_EDGES).rstrip(".")
        if PATH_LIKE.match(token) and not ABBREVIATION.fullmatch(token) and token not in paths:
            paths.append(token)
    return paths


def _exists(token: str, root: Path) -> bool:
    try:
        return _resolved(token, root).exists()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: `~nobody/x`
        return False


def _is_dir(token: str, root: Path) -> bool:
    try:
        return _resolved(token, root).is_dir()
    except (OSError, ValueError, RuntimeError):
        return False


def _resolved(token: str, root: Path) -> Path:
    candidate = Path(token).expanduser()
    return candidate if candidate.is_absolute() else root / candidate


# a prompt that opens with one of these asks for a command to run now (after any `please`,
# `can you`): a small model offered the shell explains how instead, so the call is required.
# Not so for changes: held to an edit call, such a model edits the wrong line
# (bench/offline_everyday.md); left free, it says the fix in words and the file is kept.
RUN_VERBS = _words("run execute test build compile lint")
# and a question about how the tests fare ("which test fails?", "why does test_x fail?")
# is answered by running them
TEST_WORDS = _words("test tests")
OUTCOME_WORDS = _words("fail fails failing failed failure failures pass passes passing broken")
COURTESY_WORDS = _words("please can could would will you just now go ahead and kindly ok okay yes")
# a test runner's command line typed as the prompt
TEST_RUNNERS = frozenset(
    {"pytest", "tox", "nox", "jest", "vitest", "npm test", "yarn test", "pnpm test"}
    | {"make test", "cargo test", "go test"}
)
# "build a REST API", "compile me a list": making something, not running a build
MAKING_VERBS = _words("build compile")
ARTICLES = _words("a an me us some")


def asks_test_outcome(words: frozenset[str]) -> bool:
    """The words ask how tests fare: "which test fails?", "why does test_discount fail?"
    (not "test_x fails; fix it", which asks for a change)."""
    names_test = any(w in TEST_WORDS or w.startswith("test_") for w in words)
    return names_test and bool(OUTCOME_WORDS & words) and not words & CHANGE_WORDS


# the words that ask for a file to be deleted, or moved: what those tools are offered for
# when the prompt's files all exist
DELETE_WORDS = _words("delete remove rm")
MOVE_WORDS = _words("move rename mv")


@dataclass(frozen=True, slots=True)
class PromptReading:
    """What the typed part of one prompt says: its words, and the paths it names."""

    words: frozenset[str]
    named: tuple[str, ...]  # path-like tokens, and the files attached to it
    existing: tuple[str, ...]  # those that exist in (or, when absolute, outside) the root
    directories: tuple[str, ...]  # the existing ones that are directories
    names_code: bool  # an identifier such as `count_words` or `main()`
    has_url: bool
    # files are attached but the typed text names none: a small model's retrieval chose
    # them, and it is offered no edit (held to one, it edits the wrong line)
    retrieved_only: bool = False

    @classmethod
    def of(cls, prompt: str, root: Path) -> PromptReading:
        text = typed_text(prompt)
        named = named_paths(text)
        attached = [html.unescape(p) for p in ATTACHED_FILE.findall(prompt[len(text) :])]
        typed_paths = bool(named)
        named += [p for p in attached if p not in named]
        existing = tuple(p for p in named if _exists(p, root))
        return cls(
            words=frozenset(WORD.findall(text.lower())),
            named=tuple(named),
            retrieved_only=bool(attached) and not typed_paths,
            existing=existing,
            directories=tuple(p for p in existing if _is_dir(p, root)),
            names_code=IDENTIFIER.search(text) is not None,
            has_url=URL.search(text) is not None,
        )

    @property
    def wants_change(self) -> bool:
        return bool(self.words & CHANGE_WORDS)

    @property
    def about_project(self) -> bool:
        # a name that does not exist yet counts when the prompt asks for a change (to create it)
        new_path = bool(self.named) and self.wants_change
        return (
            bool(self.existing) or new_path or self.names_code or bool(self.words & PROJECT_WORDS)
        )

    @property
    def lists_only(self) -> bool:
        """A listing question ("what files are here?", "list the python files"): it opens
        no file and searches for nothing, so a listing answers it."""
        return (
            bool(self.words & LISTING_WORDS)
            and not self.words & CONTENT_WORDS
            and not (set(self.existing) - set(self.directories))
            and not self.names_code
            and not self.wants_change
        )

    @property
    def asks_test_outcome(self) -> bool:
        return asks_test_outcome(self.words)

    def kinds(self) -> frozenset[Kind]:
        """The kinds of tool this prompt could need; empty when none."""
        kinds: set[Kind] = set()
        if self.about_project:
            kinds.add(Kind.READ)
            if not self.existing or self.names_code or self.words & SEARCH_WORDS:
                kinds.add(Kind.SEARCH)
            if self.wants_change and not self.retrieved_only:
                kinds |= EDIT_KINDS
        if self.words & RUN_WORDS or self.asks_test_outcome:
            kinds.add(Kind.EXECUTE)
        if self.has_url:
            kinds.add(Kind.FETCH)
        if kinds:
            kinds |= {Kind.THINK, Kind.OTHER}
        return frozenset(kinds)


def runs_now(tokens: list[str]) -> bool:
    """The words (courtesy stripped) are a command to run: the bare verb ("run the tests",
    not `build.py`, a heading such as `Test coverage: …`, "build a todo app", "run me
    through app.py"), or a test runner's own command line (`pytest -q`, `npm test`)."""
    if not tokens:
        return False
    if tokens[0] in TEST_RUNNERS or " ".join(tokens[:2]) in TEST_RUNNERS:
        return True
    if tokens[0] not in RUN_VERBS or any(token.endswith(":") for token in tokens[:3]):
        return False
    following = tokens[1:3]
    if tokens[0] == "run" and "through" in following:
        return False  # "run me through it": explain
    return not (tokens[0] in MAKING_VERBS and following[:1] and following[0] in ARTICLES)


def required_tool(prompt: str, specs: Sequence[ToolSpec], tools: Sequence[Tool]) -> str | None:
    """The tool the first round of a small model's turn must call: the shell for a prompt
    that opens with "run" (or "test", "build", …) or asks which tests fail or pass, when
    the shell is offered; else None."""
    text = typed_text(prompt).strip()
    tokens = text.lower().split()
    while tokens and tokens[0].strip(",.!") in COURTESY_WORDS:
        tokens.pop(0)
    if not (runs_now(tokens) or asks_test_outcome(frozenset(WORD.findall(text.lower())))):
        return None
    kinds = {tool.name: tool.kind for tool in tools}
    offered = [spec.name for spec in specs if kinds.get(spec.name) == Kind.EXECUTE]
    return offered[0] if offered else None


def offered_kinds(prompt: str, root: Path) -> frozenset[Kind]:
    """The kinds of tool the prompt of a turn in `root` could need; empty when none."""
    return PromptReading.of(prompt, root).kinds()


def top_level_files(root: Path) -> list[str]:
    """The project's visible top-level files, sorted, as a small model may name them."""
    try:
        entries = sorted(e for e in root.iterdir() if not e.name.startswith("."))
    except OSError:
        return []
    return [e.name for e in entries if e.is_file()][:MAX_PATH_CHOICES]


def offered_specs(
    prompt: str, root: Path, tools: Sequence[Tool], specs: Sequence[ToolSpec]
) -> list[ToolSpec]:
    """What a small model is offered for `prompt`: the specs (matching `tools` by name) of
    the tools it could need, each narrowed to the arguments such a model can fill. Optional
    arguments are left out (it fills them with guesses such as `limit: 1`), except a `path`
    when the prompt names an existing directory. A required `path` is pinned to the paths
    the prompt names, else, for a tool that only reads, to the project's top-level files (it
    otherwise copies the project root or invents `file.txt`); an optional `path` is pinned
    to the named directories. A listing question is offered only the tools that need no
    argument (`ls`), so there is no file or pattern to guess (asked to list "the python
    files", such a model globs `*.jsx*`). A prompt with files attached (by the user's `@`
    or a small model's retrieval) and no change to make is offered no read or search tool:
    such a model, shown both, describes the tools instead of the file. For a prompt whose
    every named file exists, no edit or write tool is offered (see the loop), nor a delete
    or move tool unless it asks to delete or move.
    The tools validate what they receive as always."""
    reading = PromptReading.of(prompt, root)
    kinds = reading.kinds()
    creates = not set(reading.named) <= set(reading.existing)  # the only edit offered
    if ATTACHMENT_START.search(prompt) and not (reading.wants_change and creates):
        kinds -= {Kind.READ, Kind.SEARCH}  # what it asks about is attached: nothing to look up
        if not kinds - {Kind.THINK, Kind.OTHER}:
            return []
    by_name = {tool.name: tool for tool in tools}
    offered = []
    for spec in specs:
        tool = by_name.get(spec.name)
        if tool is None or tool.kind not in kinds:
            continue
        if reading.lists_only and spec.parameters.get("required"):
            continue  # a pattern or a file to guess
        if tool.kind in EDIT_KINDS:
            wanted = {Kind.DELETE: DELETE_WORDS, Kind.MOVE: MOVE_WORDS}.get(tool.kind)
            if not creates and not (wanted and reading.words & wanted):
                # Only to create a file. Its edits of an existing file replace the wrong
                # text (asked to make test_discount pass, it changed VAT_RATE and broke a
                # second test: bench/offline_everyday.md) or the whole file (a write that
                # kept one line of 43); without them it shows the change in its answer.
                continue
            # a file to create need not exist yet; an edit may only create one
            creating = [p for p in reading.named if p not in reading.existing]
            files = creating if tool.kind == Kind.EDIT else list(reading.named)
        else:
            named_files = [p for p in reading.existing if p not in reading.directories]
            files = named_files or top_level_files(root)
        parameters = _narrowed(spec.parameters, files, list(reading.directories))
        offered.append(spec.model_copy(update={"parameters": parameters}))
    return offered


def _narrowed(schema: dict[str, Any], files: list[str], directories: list[str]) -> dict[str, Any]:
    """`schema` with only its required properties, a required `path` limited to `files`
    and an optional one kept, limited to `directories`, when there are any."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    required = set(schema.get("required") or [])
    kept = {name: value for name, value in properties.items() if name in required}
    if "path" in required and files:
        kept["path"] = {"type": "string", "enum": files}
    elif "path" in properties and "path" not in required and directories:
        kept["path"] = {"type": "string", "enum": directories}
    return {**schema, "properties": kept}
