"""The vocabulary of the shell read-only proof: node kinds, proofs and where bash splits text.

It holds what the tree walkers (`walker.py`, `words.py`) build on: the tables of tree-sitter-bash
node and operator kinds, the `Proof` and `Scope` values, and the checks that the parser split
the source where bash does — no text silently skipped, no two words the parser keeps apart that
bash reads as one (`''\\a`, `[ab]\\a`, a word glued to a redirection's target), no newline
inside one command, no substitution hidden in text the parser left unparsed. Quote removal
itself is `quoting.py`'s. It never runs a command. Pure functions and immutable tables; any
thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from tree_sitter import Node

from qshell.shellproof.rules import Read, Unproven

MAX_DEPTH = 60  # nested statements and words


def _set(names: str) -> frozenset[str]:
    return frozenset(names.split())


# characters bash and tree-sitter may split differently, or that hide text from a reader
BAD_CHARS = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\xa0\u1680\u2000-\u200f\u2028-\u202f\u205f\u3000\ufeff]"
)


STATEMENT_SEPARATORS = frozenset((";", "\n"))


WRITE_OPS = _set("> >> &> &>> >|")


NETWORK_DEVICES = ("/dev/tcp/", "/dev/udp/", "/dev/tcp", "/dev/udp")


REDIRECTS = _set("file_redirect heredoc_redirect herestring_redirect")


EXPANSION_OPS = _set("${ } # ## % %% - :- + :+ / // /# /% , ,, ^ ^^")


EXPANSION_REJECTS = {
    "=": "${x=…} assigns a variable",
    ":=": "${x:=…} assigns a variable",
    "?": "${x?…} is not checked",
    ":?": "${x:?…} is not checked",
    "@": "${x@…} transformations can run code",
    "!": "${!x} indirection is not checked",
    ":": "${x:offset} with a variable offset evaluates it as arithmetic code",
}


ARITH_NODES = _set(
    "number binary_expression unary_expression parenthesized_expression ternary_expression"
)


ARITH_ASSIGN = _set("= += -= *= /= %= <<= >>= &= ^= |= ++ --")


WORD_NODES = _set(
    "word number string raw_string ansi_c_string concatenation "
    "simple_expansion expansion command_substitution process_substitution "
    "arithmetic_expansion brace_expression"
)


SIMPLE_EXPANSION = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-])")


VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!\-]")


# a heredoc delimiter, plain or quoted as a whole (`'EOF'`, `"EOF"`, `\\EOF`): the forms whose
# quote removal is plain (bash keeps the backslash in `'a\\b'` and `"E\\OF"`)
HEREDOC_DELIMITER = re.compile(
    r"([A-Za-z0-9_.\-]+)|'([A-Za-z0-9_.\-]+)'|\"([A-Za-z0-9_.\-]+)\"|\\([A-Za-z0-9_.\-]+)"
)


_LINE_CONTINUATION = re.compile(r"(?<!\\)((?:\\\\)*)\\\n")  # an unescaped backslash-newline


def join_continuations(text: str) -> str:
    """`text` with its line continuations removed, as bash reads an unquoted heredoc body."""
    return _LINE_CONTINUATION.sub(r"\1", text)


_RUNS_AFTER_DOLLAR = re.compile(rb"[({\[]")  # $( ${ $[ can run code; $name is only a value


_RUNS_AFTER_DOLLAR_TEXT = re.compile(r"\$[({\[]")


@dataclass(frozen=True, slots=True)
class Proof:
    """Whether a command line is proven read-only, and what it reads if so."""

    read_only: bool
    reason: str  # "read-only", or the first thing not proven
    commands: tuple[str, ...] = ()  # commands seen, in order ("git log", "head", …)
    paths: tuple[str, ...] = ()  # literal path arguments (after quote removal, `~` kept)
    # shell source text of paths known only at run time: globs, `$VAR`, `$(…)`, and the files
    # named inside another file (`$(<list)`) or on stdin (`$(</dev/stdin)`, from xargs)
    dynamic_paths: tuple[str, ...] = ()
    reads: tuple[Read, ...] = ()  # every path it reads, with what bash expands and how deep
    objects: tuple[str, ...] = ()  # objects named to git: raw ids, `*` for run time (Judged)
    history: str = ""  # what of git's history it prints: "", "messages", "whole", "lines"


@dataclass(slots=True)
class Scope:
    """Shell state a statement runs in: a subshell may cd; relative paths follow the cd."""

    subshell: bool = False
    cwd: str | None = None
    cd_done: bool = False

    def child(self) -> Scope:
        return Scope(True, self.cwd, self.cd_done)


def fail(reason: str) -> NoReturn:
    raise Unproven(reason)


def node_text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")


def check_heredoc_body(body: Node) -> None:
    """An unquoted heredoc body expands `$(…)`, `${…}`, `$[…]` and backquotes: each must start a
    node the walker checks, and no line continuation may join `$` to what follows."""
    text = body.text or b""
    base = body.start_byte
    spans = sorted(
        (child.start_byte - base, child.end_byte - base)
        for child in body.named_children
        if child.type != "heredoc_content"
    )
    joined = False
    i = 0
    while i < len(text):
        char = text[i : i + 1]
        if spans and i >= spans[0][0]:
            i = max(i, spans.pop(0)[1])
            continue
        if char == b"\\":
            joined |= text[i + 1 : i + 2] == b"\n"
            i += 2
            continue
        if char == b"`" or (char == b"$" and _RUNS_AFTER_DOLLAR.match(text, i + 1)):
            fail("an expansion the parser did not see")
        i += 1
    if joined and (b"$" in text or b"`" in text):
        fail("a line continuation in a heredoc next to '$'")


def check_plain_pattern(node: Node) -> None:
    """Operand or pattern text the parser left unparsed (`${x-…}`, `[[ x == … ]]`): bash still
    expands it, so no substitution may hide there, even across a line continuation."""
    joined = node_text(node).replace("\\\n", "")
    if "`" in joined or _RUNS_AFTER_DOLLAR_TEXT.search(joined):
        fail("substitution inside an unparsed operand or pattern")


def construct_reason(node: Node) -> str:
    kind = node.type
    if kind in ("variable_assignment", "variable_assignments"):
        return "variable assignment changes the shell"
    if kind in ("declaration_command", "unset_command"):
        first = node.children[0].type if node.child_count else kind
        return f"'{first}' changes the shell"
    if kind == "function_definition":
        return "function definition"
    if kind in ("for_statement", "c_style_for_statement", "while_statement"):
        return f"loop ({kind.removesuffix('_statement').replace('_', '-')})"
    if kind == "case_statement":
        return "case statement"
    if kind == "ERROR":
        return "parse error"
    return f"unsupported construct '{kind}'"


def token_reason(token: str) -> str:
    if token == "&":
        return "background job '&'"
    return f"unexpected '{token}'"


_LEAF_NODES = _set("raw_string heredoc_start heredoc_body comment")


# nodes whose children are separate shell words, and what counts as a word among them
_WORD_LISTS = _set(
    "command file_redirect herestring_redirect test_command unary_expression "
    "binary_expression parenthesized_expression"
)
_WORDLIKE = WORD_NODES | _set("command_name test_operator regex extglob_pattern")
_ENDS_IN_WORD = _WORDLIKE | REDIRECTS  # a redirection ends in its target word


def _leaves(root: Node) -> list[Node]:
    out: list[Node] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count == 0 or node.type in _LEAF_NODES:
            out.append(node)
        else:
            stack.extend(reversed(node.children))
    out.sort(key=lambda n: n.start_byte)
    return out


def check_separated(root: Node) -> None:
    """Bash ends a word only at a blank or an operator: two words the parser keeps apart with
    nothing between them (`''\\a`, `[ab]\\a`, `>/dev/null"x"`) are one word to bash."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in _LEAF_NODES:
            continue
        children = node.children
        stack.extend(children)
        if node.type not in _WORD_LISTS:
            continue
        previous: Node | None = None
        for child in children:
            if (
                previous is not None
                and child.type in _WORDLIKE
                and previous.end_byte == child.start_byte
            ):
                fail("two words with nothing between them (bash reads them as one)")
            previous = child if child.type in _ENDS_IN_WORD else None


def check_gaps(source: bytes, root: Node) -> None:
    """Bytes between tokens must be blanks, or line continuations next to blanks: bash joins
    `-\\<newline>o` into one word where tree-sitter sees two, and a newline ends a command
    that tree-sitter may read on across it."""
    position = 0
    for leaf in (*_leaves(root), None):
        start = leaf.start_byte if leaf is not None else len(source)
        if start > position:
            gap = source[position:start]
            stripped = gap.replace(b"\\\n", b"")
            if b"\r" in stripped:
                fail("carriage return outside quotes (bash keeps it in the word)")
            if stripped.strip(b" \t\n"):
                fail("text the parser skipped")
            if not stripped and position and leaf is not None:
                fail("a line continuation joins two words")
            if b"\n" in stripped and leaf is not None and _inside_one_command(leaf, position):
                fail("a newline inside one command (bash ends the command there)")
        if leaf is not None:
            position = max(position, leaf.end_byte)


# where a newline between two tokens is no blank to bash but the end of a command
_ENDED_BY_NEWLINE = _set(
    "command command_name file_redirect herestring_redirect redirected_statement concatenation"
)


def _inside_one_command(leaf: Node, gap_start: int) -> bool:
    """Whether the smallest node holding both `leaf` and the gap before it is one that a
    newline ends in bash (tree-sitter reads `a<newline>\\<newline>b` as one command)."""
    node = leaf.parent
    while node is not None and node.start_byte >= gap_start:
        node = node.parent
    return node is not None and node.type in _ENDED_BY_NEWLINE
