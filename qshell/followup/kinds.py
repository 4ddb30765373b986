"""The kind of a suggested prompt — test, build, edit, explain, show, search, git, run or other — by its first words.

Confidence gating learns from this user's outcomes per kind as well as per confidence
band (followup/gating.py): a kind they never take stops being speculated, and a kind whose
speculated first step is slow (tests, builds) is preferred, since a right guess saves most
there. The kind is read off the prompt's leading words and the tool it names, never sent
anywhere and never shown; it goes to local telemetry as a word (`kind`) so the gate learns
across sessions without logging the text. Pure functions of the text: any thread.
"""

from __future__ import annotations

import re

OTHER = "other"
# kinds whose first step is a slow command unless this user's speculations have shown
# otherwise (followup/gating.py measures it per kind)
SLOW_KINDS = frozenset({"test", "build"})

_WORD = re.compile(r"[a-z0-9_+.-]+")
_TESTS = frozenset(
    {"test", "tests", "pytest", "unittest", "tox", "nox", "jest", "vitest", "mocha", "spec"}
    | {"specs", "rspec", "ctest", "testsuite", "suite"}
)
_BUILDS = frozenset({"build", "compile", "rebuild", "bundle", "package", "tsc", "cmake"})
_MAKE_TARGETS = frozenset({"all", "build", "release", "debug", "dist", "install", "check"})
_GIT = frozenset(
    {"git", "commit", "push", "pull", "merge", "rebase", "stash", "branch", "checkout"}
    | {"diff", "status", "log", "blame", "cherry-pick", "tag", "pr"}
)
_EXPLAIN = frozenset({"explain", "why", "how", "describe", "summarise", "summarize", "what"})
_SHOW = frozenset({"show", "open", "read", "print", "display", "view", "cat", "dump"})
_SEARCH = frozenset({"find", "search", "where", "grep", "list", "which", "locate", "look"})
_EDIT = frozenset(
    {"add", "fix", "rename", "change", "update", "remove", "delete", "refactor", "implement"}
    | {"write", "create", "move", "replace", "convert", "mention", "use", "rewrite", "extract"}
    | {"inline", "type", "annotate", "document", "format", "lint", "clean", "simplify"}
    | {"split", "bump", "upgrade", "drop", "insert", "append", "edit", "patch"}
)
_RUN = frozenset({"run", "rerun", "execute", "start", "launch", "try", "check", "install"})
# build tools whose next words say whether they test or build
_TOOLS = frozenset(
    {"npm", "yarn", "pnpm", "bun", "cargo", "go", "mvn", "gradle", "dotnet", "bazel", "uv"}
    | {"poetry", "pip", "python", "python3", "node", "deno", "mix", "swift", "zig"}
)
_FILLER = frozenset({"now", "please", "then", "also", "ok", "okay", "and", "so", "can", "you"})


def kind_of(prompt: str) -> str:
    """The kind of `prompt`: what it asks for, by its first words (see the module)."""
    words = _WORD.findall(prompt.lower())
    while words and words[0] in _FILLER:
        words = words[1:]
    if not words:
        return OTHER
    head, rest = words[0], set(words[1:6])
    if head in _GIT or (head in _RUN and rest & {"git", "commit"}):
        return "git"
    runs = _RUN | _TOOLS
    if head in _TESTS or (head in runs | {"make"} and rest & _TESTS):
        return "test"
    if head in _BUILDS or (head in runs and rest & _BUILDS):
        return "build"
    if head == "make":  # `make`, `make all` build; "make app.py shout" is an edit
        return "build" if len(words) == 1 or words[1] in _MAKE_TARGETS else "edit"
    if head in runs:
        return "run"
    for kind, heads in (("explain", _EXPLAIN), ("show", _SHOW), ("search", _SEARCH)):
        if head in heads:
            return kind
    return "edit" if head in _EDIT else OTHER
