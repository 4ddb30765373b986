"""`[[ … ]]` as bash reads it: its tokens, what each word is, and the files it tests.

tree-sitter-bash parses a conditional as an arithmetic-like expression: `~/x` becomes the
operator `~` applied to `/x`, `-1` a negation, `~ -nt F` a unary `~`. Bash reads words
instead. So the expression's leaves are taken in source order and glued back into bash's
words where nothing separates them (`~` `/x` is the word `~/x`); `(`, `)`, `&&`, `||`, `<`
and `>` are tokens of their own and may not touch another leaf (bash's extended-glob
lexing could read `@(` as part of a word). rules/conditions.py `cond_roles` then parses the
tokens with bash's grammar and says what each word is: a file operand (`-e -f -d -r -s -L …`,
either side of `-nt -ot -ef`) is a read — tilde-expanded, never globbed, as bash tests it —
which the caller checks for scope like `cat`'s; arithmetic operands must be plain numbers
(bash evaluates them as code); patterns and regular expressions may hide no substitution;
every other word is proven as a word. A word glued from several leaves is parsed again on
its own (`: WORD`) and proven from that parse. Pure: never runs anything; one per check.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Protocol

from tree_sitter import Node

from qshell.shellproof.rules import Read
from qshell.shellproof.rules.conditions import SEPARATORS, CondToken, Role, cond_roles
from qshell.shellproof.syntax import WORD_NODES, Scope, check_plain_pattern, fail
from qshell.shellproof.words import WordProver

_EXPRESSIONS = frozenset(("unary_expression", "binary_expression", "parenthesized_expression"))
_PATTERNS = frozenset(("regex", "extglob_pattern"))
_LEAVES = WORD_NODES | _PATTERNS | {"test_operator"}


class Conditional(Protocol):
    """What proving `[[ … ]]` needs of the statement walker."""

    words: WordProver

    def read(self, read: Read, scope: Scope) -> None:
        """Record a read of the proof."""

    def reparsed(self, text: bytes, what: str) -> AbstractContextManager[Node]:
        """`text` parsed as a line of its own, the walker reading it as its source."""


def _leaves(node: Node) -> Iterator[Node]:
    if node.type in _EXPRESSIONS:
        for child in node.children:
            yield from _leaves(child)
    elif node.type in _LEAVES or not node.is_named:
        yield node
    else:
        fail(f"unsupported '{node.type}' in [[ … ]]")


def _words(leaves: list[Node]) -> list[list[Node]]:
    """The leaves grouped into bash's tokens: a separator alone, touching leaves as one word."""
    groups: list[list[Node]] = []
    for leaf in leaves:
        previous = groups[-1][-1] if groups else None
        touching = previous is not None and previous.end_byte == leaf.start_byte
        separator = not leaf.is_named and leaf.type in SEPARATORS
        if touching and (separator or _is_separator(groups[-1])):
            fail("an operator touching a word in [[ … ]] (bash may read them otherwise)")
        if touching:
            groups[-1].append(leaf)
        else:
            groups.append([leaf])
    return groups


def _is_separator(group: list[Node]) -> bool:
    return len(group) == 1 and not group[0].is_named and group[0].type in SEPARATORS


def _text(group: list[Node], test: Node) -> str:
    source, base = test.text or b"", test.start_byte
    return source[group[0].start_byte - base : group[-1].end_byte - base].decode(
        "utf-8", "surrogateescape"
    )


def prove_conditional(walker: Conditional, test: Node, scope: Scope) -> None:
    """Prove the `[[ … ]]` node `test` (its children between the brackets) or raise Unproven."""
    leaves = [leaf for child in test.children[1:-1] for leaf in _leaves(child)]
    groups = _words(sorted(leaves, key=lambda leaf: leaf.start_byte))
    tokens = [CondToken(_text(g, test), not _is_separator(g)) for g in groups]
    roles = cond_roles(tokens)
    for index, role in roles.items():
        _operand(walker, groups[index], tokens[index].text, role, scope)


def _operand(walker: Conditional, group: list[Node], text: str, role: Role, scope: Scope) -> None:
    if role is Role.OPERATOR:
        return
    if role is Role.NUMBER:
        if not text.isdigit():
            fail("[[ arithmetic ]] evaluates variables as code")
        return
    if len(group) == 1 and group[0].type in _PATTERNS:
        if role is Role.FILE:
            fail("unusual file operand in [[ … ]]")
        check_plain_pattern(group[0])
        return
    if len(group) == 1 and group[0].type in WORD_NODES:
        _word(walker, group[0], role, scope)
        return
    if any(leaf.type in _PATTERNS for leaf in group):
        fail("unusual pattern in [[ … ]]")
    line = b": " + text.encode("utf-8", "surrogateescape")
    with walker.reparsed(line, "a word in [[ … ]]") as root:
        _word(walker, _only_argument(root, len(line)), role, scope)


def _word(walker: Conditional, node: Node, role: Role, scope: Scope) -> None:
    if role is Role.FILE:
        walker.read(walker.words.path(node, scope), scope)
    else:
        walker.words.word(node, scope)


def _only_argument(root: Node, end: int) -> Node:
    """The one argument of the line `: WORD`, which must span all of WORD."""
    commands = root.named_children
    single = len(commands) == 1 and commands[0].type == "command"
    parts = commands[0].named_children if single else []
    if (
        len(parts) != 2
        or parts[0].type != "command_name"
        or parts[1].type not in WORD_NODES
        or (parts[1].start_byte, parts[1].end_byte) != (2, end)
    ):
        fail("a word in [[ … ]] that does not read as one word")
    return parts[1]
