"""Words of the shell read-only proof: how the tree walker proves a single word.

`WordProver` is the half of the walker that turns one word node (plain, quoted, concatenated,
with expansions, arithmetic or command substitutions) into a decoded `Word`, rejecting whatever
could run code or is only known at run time where that matters. It hands the text to
`quoting.py` as bash sees it — a double-quoted string is every byte between its quotes, also
the newlines and blanks tree-sitter leaves outside its tokens — and refuses a backslash inside
backquotes (bash removes it and parses the text again). Substitutions are proven by recursing
into the statement walker it is given (`Statements`: `walker.Walker`, the other half —
statements, pipelines, redirections and tests). Pure: no command is ever run; one prover per
check, so not shared between threads.
"""

from __future__ import annotations

from typing import Protocol

from tree_sitter import Node

from qshell.shellproof.quoting import (
    DYN_QUOTED,
    DYN_UNQUOTED,
    GLOB,
    LIT,
    PROCSUB,
    assemble_word,
    check_dollars,
    decode_ansi,
    decode_double,
    decode_unquoted,
    unexpanded_read,
)
from qshell.shellproof.rules import Read, Word
from qshell.shellproof.syntax import (
    ARITH_ASSIGN,
    ARITH_NODES,
    EXPANSION_OPS,
    EXPANSION_REJECTS,
    MAX_DEPTH,
    REDIRECTS,
    SIMPLE_EXPANSION,
    VARIABLE_NAME,
    Scope,
    check_plain_pattern,
    fail,
    node_text,
    token_reason,
)


class Statements(Protocol):
    """What a word proof needs of the statement walker: substitutions hold statements."""

    depth: int  # nesting of statements and words so far, shared by both halves

    def statement(self, node: Node, scope: Scope, piped: bool = False) -> None:
        """Prove one statement, or raise Unproven."""

    def redirect(self, node: Node, scope: Scope, args: list[Word] | None) -> None:
        """Prove one redirection, or raise Unproven."""


class WordProver:
    """Word-level proofs for one check, recursing into `walker` for substitutions."""

    def __init__(self, walker: Statements) -> None:
        self.walker = walker

    def word(self, node: Node, scope: Scope) -> Word:
        return assemble_word(self.proven(node, scope), node_text(node))

    def path(self, node: Node, scope: Scope) -> Read:
        """The file a `[[ … ]]` operand names: no brace or pathname expansion there."""
        return unexpanded_read(self.proven(node, scope), node_text(node))

    def proven(self, node: Node, scope: Scope) -> list[tuple[int, str]]:
        """The pieces of one word node, every substitution in it proven."""
        self.walker.depth += 1
        if self.walker.depth > MAX_DEPTH:
            fail("too deeply nested")
        pieces: list[tuple[int, str]] = []
        self.pieces(node, scope, pieces, quoted=False)
        self.walker.depth -= 1
        return pieces

    def pieces(self, node: Node, scope: Scope, out: list[tuple[int, str]], quoted: bool) -> None:
        kind = node.type
        dyn = DYN_QUOTED if quoted else DYN_UNQUOTED
        if kind == "word" or kind == "number":
            decode_unquoted(node_text(node), out)
        elif kind == "raw_string":
            out.append((LIT, node_text(node)[1:-1]))
        elif kind == "ansi_c_string":
            out.append((LIT, decode_ansi(node_text(node))))
        elif kind == "string":
            self.double_quoted(node, scope, out)
        elif kind == "concatenation":
            children = node.children
            for i, child in enumerate(children):
                if child.is_named:
                    self.pieces(child, scope, out, quoted)
                elif child.type == "$" and i == len(children) - 1:
                    out.append((LIT, "$"))
                else:
                    fail(token_reason(child.type))
        elif kind == "simple_expansion":  # in a string, its node may start at blanks before it
            text = node_text(node).lstrip(" \t\n") if quoted else node_text(node)
            if not SIMPLE_EXPANSION.fullmatch(text):
                fail("unusual $ expansion")
            out.append((dyn, text))
        elif kind == "expansion":
            self.expansion(node, scope)
            out.append((dyn, node_text(node)))
        elif kind == "command_substitution":
            self.substitution(node, scope)
            out.append((dyn, node_text(node)))
        elif kind == "process_substitution":
            if node.child_count and node.children[0].type != "<(":
                fail("output process substitution >( … )")
            self.substitution(node, scope)
            out.append((PROCSUB, node_text(node)))
        elif kind == "arithmetic_expansion":
            self.arithmetic(node)
            out.append((dyn, node_text(node)))
        elif kind == "brace_expression":
            out.append((GLOB, node_text(node)))
        else:
            fail(f"unsupported word '{kind}'")

    def double_quoted(self, node: Node, scope: Scope, out: list[tuple[int, str]]) -> None:
        """Check a "…" string; append its pieces to `out`. Its text is all the bytes between the
        quotes outside expansions: the parser leaves newlines, and blanks before a closing
        quote or a `$`, out of its tokens."""
        buf: list[str] = []
        dynamic: list[str] = []
        joined = False
        source, base = node.text or b"", node.start_byte
        position = 1  # after the opening quote
        for child in node.children[1:-1]:
            kind = child.type
            if kind == "string_content":
                continue
            start = child.end_byte - base - 1  # a `$` token may span blanks before it
            if child.is_named:  # so may an expansion: they are the string's text
                text = child.text or b""
                start = child.start_byte - base + len(text) - len(text.lstrip(b" \t\n"))
            if start < position:
                fail(f"unusual '{kind}' in a string")
            joined |= decode_double(source[position:start].decode("utf-8", "surrogateescape"), buf)
            position = child.end_byte - base
            if kind in (
                "simple_expansion",
                "expansion",
                "command_substitution",
                "arithmetic_expansion",
            ):
                self.pieces(child, scope, [], quoted=True)
                buf.append("\x01")
                dynamic.append(node_text(child).lstrip(" \t\n"))
            elif kind == "$":
                buf.append("\0")
            else:
                fail(f"unsupported '{kind}' in a string")
        if node.child_count < 2 or not source.endswith(b'"') or not source.startswith(b'"'):
            fail("unterminated string")
        joined |= decode_double(source[position:-1].decode("utf-8", "surrogateescape"), buf)
        literals = check_dollars("".join(buf), joined).split("\x01")
        for i, (literal, raw) in enumerate(zip(literals, [*dynamic, ""], strict=True)):
            if literal or i == 0:  # even "" is a quoted part: `""~` is no tilde
                out.append((LIT, literal))
            if raw:
                out.append((DYN_QUOTED, raw))

    def expansion(self, node: Node, scope: Scope) -> None:
        children = node.children
        colon = next((i for i, c in enumerate(children) if c.type == ":"), -1)
        if colon >= 0:  # ${x:offset:length}: offset and length are arithmetic, numbers only
            base = children[:colon]
            names = [c for c in base if c.is_named]
            if any(
                c.type != "variable_name" or not VARIABLE_NAME.fullmatch(node_text(c))
                for c in names
            ) or any(c.is_named and c.type != "number" for c in children[colon:]):
                fail(EXPANSION_REJECTS[":"])
            return
        for child in children:
            kind = child.type
            if not child.is_named:
                if kind in EXPANSION_REJECTS:
                    fail(EXPANSION_REJECTS[kind])
                if kind not in EXPANSION_OPS:
                    fail(f"${{…{kind}…}} is not checked")
            elif kind in ("variable_name", "special_variable_name"):
                if not VARIABLE_NAME.fullmatch(node_text(child)):
                    fail("unusual ${…} expansion")
            elif kind == "subscript":
                index = child.child_by_field_name("index")
                if index is None or not (index.type == "number" or node_text(index) in ("@", "*")):
                    fail("array index evaluated as arithmetic code")
            else:
                self.operand(child, scope)

    def operand(self, node: Node, scope: Scope) -> None:
        """The word in `${x:-word}`: blanks are part of it; substitutions must be proven."""
        if node.type in ("word", "regex"):
            check_plain_pattern(node)
        elif node.type == "concatenation":
            for child in node.named_children:
                self.operand(child, scope)
        else:
            self.pieces(node, scope, [], quoted=True)

    def arithmetic(self, node: Node) -> None:
        """Numbers and operators only: bash evaluates a variable's value as arithmetic code."""
        stack = list(node.children)
        named: list[str] = []
        while stack:
            child = stack.pop()
            if child.type in ARITH_ASSIGN:
                fail("arithmetic assignment")
            if child.is_named:
                named.append(child.type)
                stack.extend(child.children)
        for kind in named:
            if kind == "variable_name":
                fail("arithmetic on a variable evaluates its value as code")
            if kind not in ARITH_NODES:
                fail(f"arithmetic '{kind}' is not checked")

    def substitution(self, node: Node, scope: Scope) -> None:
        if node.child_count and node.children[0].type == "`" and b"\\" in (node.text or b""):
            # bash drops the backslash of \$ \` \\ and parses the rest again: `\`rm\``
            fail("a backslash inside `…` (bash parses its text again)")
        inner = scope.child()
        for child in node.children:
            if child.type in REDIRECTS:
                self.walker.redirect(child, inner, None)
            elif child.is_named:
                self.walker.statement(child, inner)
            elif child.type not in ("$(", "`", "<(", ")", ";"):
                fail(token_reason(child.type))
