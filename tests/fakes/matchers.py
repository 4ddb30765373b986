"""Request predicates for fake-server rules, composable with `&`, `|` and `~`.

Each helper returns a `Match`, a callable over a `RecordedRequest` that reads only the
request's protocol-neutral views (so one rule serves both wire formats). Matchers must not
mutate the request or keep state; they may run on any handler thread concurrently.
Matching is case-sensitive substring search.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.fakes.recording import RecordedRequest

Predicate = Callable[["RecordedRequest"], bool]


class Match:
    """A named predicate. `a & b`, `a | b` and `~a` build new ones."""

    def __init__(self, test: Predicate, description: str) -> None:
        self._test = test
        self.description = description

    def __call__(self, request: RecordedRequest) -> bool:
        return bool(self._test(request))

    def __and__(self, other: Predicate) -> Match:
        return all_of(self, other)

    def __or__(self, other: Predicate) -> Match:
        return any_of(self, other)

    def __invert__(self) -> Match:
        return Match(lambda r: not self(r), f"not ({self.description})")

    def __repr__(self) -> str:
        return f"Match({self.description})"


def _describe(predicate: Predicate) -> str:
    return getattr(predicate, "description", getattr(predicate, "__name__", repr(predicate)))


def always() -> Match:
    return Match(lambda _r: True, "always")


def last_user_text_contains(text: str) -> Match:
    """The last user message that has text contains `text` (tool-result-only turns skip)."""
    return Match(lambda r: text in r.last_user_text, f"last user text contains {text!r}")


def has_tool_result(containing: str | None = None) -> Match:
    """The last message carries a tool result (optionally one containing `containing`)."""

    def test(request: RecordedRequest) -> bool:
        results = request.last_tool_results
        if containing is None:
            return bool(results)
        return any(containing in result.content for result in results)

    label = "has tool result" + ("" if containing is None else f" containing {containing!r}")
    return Match(test, label)


def system_contains(text: str) -> Match:
    return Match(lambda r: text in r.system_text, f"system contains {text!r}")


def any_text_contains(text: str) -> Match:
    """Anywhere in system, messages, tool arguments or tool results."""
    return Match(lambda r: text in r.all_text, f"any text contains {text!r}")


def model_is(name: str) -> Match:
    return Match(lambda r: r.model == name, f"model is {name!r}")


def protocol_is(protocol: str) -> Match:
    return Match(lambda r: r.protocol == protocol, f"protocol is {protocol}")


def all_of(*predicates: Predicate) -> Match:
    label = " and ".join(_describe(p) for p in predicates) or "always"
    return Match(lambda r: all(p(r) for p in predicates), label)


def any_of(*predicates: Predicate) -> Match:
    label = " or ".join(_describe(p) for p in predicates) or "never"
    return Match(lambda r: any(p(r) for p in predicates), label)
