"""Consequence rules: which next-prompt suggestions would do something hard to take back.

A rule is one string, `kind: phrase, phrase, …` (or a bare phrase, which is its own kind):
`push: push, force-push, git push, 推送`. A phrase matches whole words in any common form
("push", "pushes", "pushed", "pushing"; "delete", "deleting"; "ship", "shipping"), case
and hyphen/space insensitive ("force push" = "force-push"); a phrase with CJK characters
matches as a plain substring. `ConsequenceRules.kind(text)` names the first kind a text
matches, `kinds(text)` every kind it mentions — what a user's own typed prompt asked for.
The defaults (`DEFAULT_RULES`, the `suggestions.consequential` setting) cover push,
deploy, publish, release, delete, reset, force, send and pay in English and Chinese;
plugins add rules through `qshell_consequential_words`. It decides nothing about showing
or speculating (followup/followup.py does) and touches no session, terminal or network.
Immutable once built: safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from qshell.config import DEFAULTS
from qshell.followup.suggestion import CJK

DEFAULT_RULES = DEFAULTS.suggestions.consequential
_SUFFIXES = "(?:s|es|ed|d|ing)?"
_INNER_HYPHEN = re.compile(r"(?<=\w)-(?=\w)")


def _word(token: str) -> str:
    """One token as a pattern: inflections allowed on a trailing word, hyphen = space."""
    body = "[-\\s]?".join(re.escape(piece) for piece in _INNER_HYPHEN.split(token))
    last = token[-1]
    if last.isalnum():
        if last == "e":
            body = body[:-1] + "(?:e|es|ed|ing)?"
        elif last.lower() not in "aeiouy":
            body = f"{body}(?:{re.escape(last)})?{_SUFFIXES}"
        else:
            body += _SUFFIXES
    head = "(?<!\\w)" if token[0].isalnum() else "(?<![\\w-])"
    tail = "(?!\\w)" if last.isalnum() or last == "-" else ""
    return f"{head}{body}{tail}"


def phrase_pattern(phrase: str) -> str:
    """The regular expression of one phrase (see the module docstring)."""
    phrase = phrase.strip()
    if CJK.search(phrase):
        return re.escape(phrase)
    return "\\s+".join(_word(token) for token in phrase.split())


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]


def parse_rule(rule: str) -> _Rule | None:
    """`kind: a, b` or a bare phrase; None for an empty rule."""
    kind, colon, rest = rule.partition(":")
    if not colon or " " in kind.strip() or not rest.strip():
        kind, rest = rule, rule
    phrases = [p for p in (part.strip() for part in rest.split(",")) if p]
    if not phrases or not kind.strip():
        return None
    joined = "|".join(f"(?:{phrase_pattern(p)})" for p in phrases)
    return _Rule(kind.strip().lower(), re.compile(joined, re.IGNORECASE))


class ConsequenceRules:
    """The compiled rule list: the setting's rules, then those plugins added."""

    def __init__(self, rules: Iterable[str]) -> None:
        self._rules = tuple(r for r in (parse_rule(rule) for rule in rules) if r is not None)

    def kinds(self, text: str) -> frozenset[str]:
        """Every kind of action `text` mentions."""
        return frozenset(rule.kind for rule in self._rules if rule.pattern.search(text))

    def kind(self, text: str) -> str | None:
        """The first kind `text` matches, in rule order; None for a harmless text."""
        for rule in self._rules:
            if rule.pattern.search(text):
                return rule.kind
        return None
