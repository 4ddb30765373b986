"""The statement walker of the shell read-only proof, and `check`, its one entry point.

Speculation may run a shell command only when `check` proves it read-only. The line is parsed
with tree-sitter-bash and every node is walked: only known statements, words and redirections
(input, or output to `/dev/null`) pass; substitutions pass only when every inner command is
proven too; `cd` only inside a subshell; every environment prefix (`FOO=1 cmd`) is refused, as
the corpus decides; each simple command must pass its allowlist rule in `rules`. Where
tree-sitter reads the text otherwise than bash, bash's reading is proven: `[ … ]` is parsed
again as the simple command bash runs (so `>` there is a redirection and `||` ends it),
`[[ … ]]` is read as bash's words and grammar (cond.py: `~/x` one word, a file test's
operand a read), a heredoc ends where bash ends it (delimiters whose quote removal is plain; continued lines of
an unquoted body joined), and a word glued to a redirection (`{NAME}>…` assigns NAME) is
refused. Parse errors, unknown node types, text the parser skipped or split differently from
bash (line continuations, carriage returns, blanks inside a word, two words bash reads as
one) and anything computed at run time where it could change the command are refused;
`Proof.reason` names the first. `paths` and
`dynamic_paths` tell the gate what the command reads so it can apply the read-scope rules. It
never runs the command: the caller runs a proven one with `sanitized_env` (no pager, git hardened
through `GIT_CONFIG_*`), stdin closed, no TTY and at most `SHELL_TIMEOUT_S` (env.py). Left to that
environment and not provable from the text: git drivers the user configured
(`diff.external`, textconv and filter drivers) still run; `diff.external` cannot be unset by
configuration (an empty value makes every `git diff` fail), so only `GIT_EXTERNAL_DIFF` is
dropped. Thread rule: one tree-sitter parser per thread (`threading.local`); all else is pure,
so `check` is safe from any thread.
"""

from __future__ import annotations

import dataclasses
import posixpath
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from qshell.shellproof.cond import prove_conditional
from qshell.shellproof.extra import ReadOnlyRule, declared
from qshell.shellproof.rules import TRUSTED_DIRS, Judged, Read, Unproven, Word, judge, read_of
from qshell.shellproof.syntax import (
    BAD_CHARS,
    HEREDOC_DELIMITER,
    MAX_DEPTH,
    NETWORK_DEVICES,
    REDIRECTS,
    STATEMENT_SEPARATORS,
    WRITE_OPS,
    Proof,
    Scope,
    check_gaps,
    check_heredoc_body,
    check_separated,
    construct_reason,
    fail,
    join_continuations,
    node_text,
    token_reason,
)
from qshell.shellproof.words import WordProver

MAX_COMMAND_BYTES = 8192
HISTORY_RANK = ("", "messages", "whole", "lines")  # Judged.history, least to most


_LANGUAGE = Language(tree_sitter_bash.language())


_LOCAL = threading.local()


def parser() -> Parser:
    """This thread's tree-sitter-bash parser."""
    found: Parser | None = getattr(_LOCAL, "parser", None)
    if found is None:
        found = _LOCAL.parser = Parser(_LANGUAGE)
    return found


class Walker:
    """One proof: walks the tree, collects commands and paths, raises Unproven on a gap."""

    def __init__(self, source: bytes, extra: ReadOnlyRule | None = None) -> None:
        self.source = source
        self.extra = extra  # the caller's own read-only forms (extra.py)
        self.commands: list[str] = []
        self.paths: list[str] = []
        self.dynamic: list[str] = []
        self.reads: list[Read] = []
        self.objects: list[str] = []
        self.history = ""
        self.depth = 0
        self.heredocs = 0
        self.words = WordProver(self)

    # ------------------------------------------------------------ statements

    def statement(self, node: Node, scope: Scope, piped: bool = False) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            fail("too deeply nested")
        kind = node.type
        if kind == "command":
            self.command(node, scope, [], piped)
        elif kind == "program":
            self.sequence(node, scope, STATEMENT_SEPARATORS)
        elif kind == "list":
            self.sequence(node, scope, frozenset(("&&", "||")))
        elif kind == "pipeline":
            self.pipeline(node, scope)
        elif kind == "redirected_statement":
            self.redirected(node, scope, piped)
        elif kind == "subshell":
            self.sequence(node, scope.child(), frozenset(("(", ")", ";")))
        elif kind == "compound_statement":
            if node.child_count and node.children[0].type == "((":
                fail("arithmetic command (( … ))")
            self.sequence(node, scope, frozenset(("{", "}", ";")))
        elif kind == "negated_command":
            self.sequence(node, scope, frozenset(("!",)))
        elif kind in ("if_statement", "elif_clause", "else_clause"):
            self.sequence(node, scope, frozenset(("if", "then", "fi", "elif", "else", ";")))
        elif kind == "test_command":
            self.test(node, scope)
        elif kind != "comment":
            fail(construct_reason(node))
        self.depth -= 1

    def sequence(self, node: Node, scope: Scope, tokens: frozenset[str]) -> None:
        for child in node.children:
            if child.is_named:
                self.statement(child, scope)
            elif child.type not in tokens:
                fail(token_reason(child.type))

    def pipeline(self, node: Node, scope: Scope) -> None:
        parts = [child for child in node.children if child.is_named]
        for child in node.children:
            if not child.is_named and child.type not in ("|", "|&"):
                fail(token_reason(child.type))
        for i, child in enumerate(parts):
            self.statement(child, scope, piped=i < len(parts) - 1)

    def redirected(self, node: Node, scope: Scope, piped: bool) -> None:
        body: Node | None = None
        extra: list[Word] = []
        for child in node.children:
            if child.type in REDIRECTS:
                self.redirect(child, scope, extra)
            elif child.is_named:
                if body is not None:
                    fail("unusual redirection")
                body = child
            else:
                fail(token_reason(child.type))
        if body is None:
            if extra:
                fail("unusual redirection")
            return
        if body.type == "command":
            self.depth += 1
            self.command(body, scope, extra, piped)
            self.depth -= 1
        elif extra:
            fail("unusual redirection")
        else:
            self.statement(body, scope, piped)

    # ------------------------------------------------------------ simple commands

    def command(self, node: Node, scope: Scope, extra: list[Word], piped: bool) -> None:
        name_node: Node | None = None
        args: list[Word] = []
        for child in node.children:
            kind = child.type
            if kind == "command_name":
                name_node = child
            elif kind in REDIRECTS:
                self.redirect(child, scope, args)
            elif kind == "variable_assignment":
                name = node_text(child).partition("=")[0]
                fail(f"environment prefix '{name}=' on a command")
            elif child.is_named:
                args.append(self.words.word(child, scope))
            else:
                fail(token_reason(kind))
        args.extend(extra)
        if name_node is None:
            if args:
                fail("unusual redirection")
            return
        if b"$'" in (name_node.text or b""):
            fail("ANSI-C quoted command name")
        parts = name_node.named_children
        if len(parts) != 1:
            fail("unusual command name")
        name_word = self.words.word(parts[0], scope)
        if not name_word.literal:
            fail("command name computed at run time")
        name = name_word.text
        if "/" in name:
            directory, name = posixpath.split(posixpath.normpath(name))
            if directory not in TRUSTED_DIRS:
                fail(f"command path '{name_word.text}' is outside the system directories")
        if not name:
            fail("empty command name")
        if name == "cd":
            self.cd(args, scope)
            return
        if name == "yes" and not piped:
            fail("never ends: yes")
        if name == "git" and scope.cd_done:
            fail("git after cd (another directory's git config can run programs)")
        judged = self.judge(name, args)
        self.commands.append(judged.label)
        self.objects += judged.objects
        self.history = max(self.history, judged.history, key=HISTORY_RANK.index)
        for read in judged.reads:
            self.read(read, scope)

    def judge(self, name: str, args: list[Word]) -> Judged:
        """The rules' judgement, else the caller's declaration (extra.py), else Unproven."""
        try:
            return judge(name, args)
        except Unproven:
            found = declared(name, args, self.extra) if self.extra is not None else None
            if found is None:
                raise
            return found

    def cd(self, args: list[Word], scope: Scope) -> None:
        if not scope.subshell:
            fail("cd outside a subshell")
        targets = [w for w in args if not (w.literal and w.text in ("-L", "-P", "--"))]
        if len(targets) > 1:
            fail("cd with several operands")
        target = targets[0] if targets else Word("~", "~", True, False, False, "~")
        if not target.literal:
            fail("cd to a directory computed at run time")
        if target.text.startswith("-"):
            fail(f"cd {target.text} is not checked")
        self.read(read_of(target), scope)
        new = target.text
        if scope.cwd and not new.startswith(("/", "~")):
            new = posixpath.join(scope.cwd, new)
        scope.cwd = new
        scope.cd_done = True
        self.commands.append("cd")

    def read(self, read: Read, scope: Scope) -> None:
        """Record what a command reads: as a Read, and in the text lists of the proof."""
        self.reads.append(dataclasses.replace(read, cwd=scope.cwd) if scope.cwd else read)
        out = self.paths if read.literal else self.dynamic
        out.append(read.text)
        if scope.cwd and not read.text.startswith(("/", "~")):
            out.append(posixpath.join(scope.cwd, read.text))

    # ------------------------------------------------------------ redirections

    def redirect(self, node: Node, scope: Scope, args: list[Word] | None) -> None:
        """Only input, /dev/null and fd duplication; extra target words are command arguments
        (`grep x 2>/dev/null file`), appended to `args` (rejected where there is no command)."""
        self.glued(node)
        kind = node.type
        if kind == "heredoc_redirect":
            self.heredoc(node, scope)
            return
        if kind == "herestring_redirect":
            for child in node.children:
                if child.is_named:
                    self.words.word(child, scope)
                elif child.type != "<<<":
                    fail(token_reason(child.type))
            return
        operator = ""
        targets: list[Node] = []
        for child in node.children:
            if child.type == "file_descriptor":
                continue
            if child.is_named:
                targets.append(child)
            else:
                operator = child.type
        if operator in ("<&-", ">&-") and not targets:
            return
        if not targets:
            fail("unusual redirection")
        if len(targets) > 1:
            if args is None:
                fail("unusual redirection")
            args.extend(self.words.word(extra, scope) for extra in targets[1:])
        target = targets[0]
        if operator == "<" and target.type == "process_substitution":
            self.words.word(target, scope)
            return
        word = self.words.word(target, scope)
        if operator == "<":
            if not word.literal:
                fail("input redirection from a path computed at run time")
            if posixpath.normpath(word.text).startswith(NETWORK_DEVICES) or word.text.startswith(
                NETWORK_DEVICES
            ):
                fail("redirection opens a network connection")
            self.read(read_of(word), scope)
        elif operator in (">&", "<&") and word.literal and word.text in ("0", "1", "2", "-"):
            return
        elif operator in WRITE_OPS or operator == ">&":
            if not (word.literal and word.text == "/dev/null"):
                fail("redirection to a file")
        else:
            fail(f"redirection '{operator}' is not checked")

    def glued(self, node: Node) -> None:
        """What bash makes of a word glued to a redirection: `{NAME}>…` opens a descriptor and
        assigns its number to NAME (PATH included); digits would be the descriptor number."""
        start = i = node.start_byte
        while i > 0 and self.source[i - 1 : i] not in b" \t\n;&|()<>":
            i -= 1
        word = self.source[i:start]
        if word.startswith(b"{") and word.endswith(b"}"):
            fail("named descriptor redirection {NAME}<… assigns a variable")
        if word and node.child_count and node.children[0].type == "file_descriptor":
            fail("a descriptor number glued to the word before it")

    def heredoc(self, node: Node, scope: Scope) -> None:
        self.heredocs += 1
        if self.heredocs > 1:
            fail("more than one heredoc")
        start = body = end = None
        dash = False
        for child in node.children:
            kind = child.type
            if kind == "heredoc_start":
                start = child
            elif kind == "heredoc_body":
                body = child
            elif kind == "heredoc_end":
                end = child
            elif kind in REDIRECTS:
                self.redirect(child, scope, None)
            elif child.is_named:
                self.statement(child, scope)
            elif kind == "<<-":
                dash = True
            elif kind not in ("<<", "&&", "||", "|", "|&", ";"):
                fail(token_reason(kind))
        if start is None or end is None:
            fail("unterminated heredoc")
        match = HEREDOC_DELIMITER.fullmatch(node_text(start))
        if match is None:
            fail("unusual heredoc delimiter")
        delimiter = next(group for group in match.groups() if group)
        if node_text(end) != delimiter:
            fail("heredoc delimiter mismatch")
        text = node_text(body) if body is not None else ""
        lines = text.split("\n")
        if match.group(1):  # bash joins continued lines of an unquoted body, delimiter too
            lines += join_continuations(text).split("\n")
        for line in lines:
            if (line.lstrip("\t") if dash else line) == delimiter:
                fail("heredoc body holds its own delimiter")
        if body is None or not match.group(1):
            return  # a quoted delimiter keeps the body literal
        check_heredoc_body(body)
        for child in body.named_children:
            if child.type != "heredoc_content":
                self.words.pieces(child, scope, [], quoted=True)

    # ------------------------------------------------------------ words

    # ------------------------------------------------------------ [ … ] and [[ … ]]

    def test(self, node: Node, scope: Scope) -> None:
        children = node.children
        if not children or children[0].type not in ("[", "[["):
            fail("unusual test command")
        if children[0].type == "[":
            self.bracket(node, scope)
            return
        prove_conditional(self, node, scope)
        self.commands.append("[[")

    def bracket(self, node: Node, scope: Scope) -> None:
        """Bash runs `[` as a simple command, where `>` and `<` are redirections and `||`, `|`
        and `&` end it; tree-sitter reads a test expression. The text is parsed again as the
        command `\\[ …` and proven like any other (its rule is `test`'s)."""
        with self.reparsed(b"\\" + (node.text or b""), "[ … ]") as root:
            self.statement(root, scope)

    @contextmanager
    def reparsed(self, text: bytes, what: str) -> Iterator[Node]:
        """`text` parsed as a line of its own, and read as the source while the caller proves
        it; `what` names it when it does not parse as what bash runs."""
        root = parser().parse(text).root_node
        if root.has_error:
            fail(f"{what} does not parse as what bash runs")
        check_gaps(text, root)
        source, self.source = self.source, text
        try:
            yield root
        finally:
            self.source = source
        check_separated(root)


def _proof(command: str, extra: ReadOnlyRule | None) -> Proof:
    if not command.strip():
        return Proof(False, "empty command")
    source = command.encode("utf-8", "surrogatepass")
    if len(source) > MAX_COMMAND_BYTES:
        return Proof(False, "command too long")
    bad = BAD_CHARS.search(command)
    if bad:
        return Proof(False, f"control or unusual whitespace character {bad.group()!r}")
    tree = parser().parse(source)
    root = tree.root_node
    if root.has_error:
        return Proof(False, "parse error")
    walker = Walker(source, extra)
    try:
        check_gaps(source, root)
        walker.statement(root, Scope())
        check_separated(root)
    except Unproven as exc:
        return Proof(False, exc.reason, tuple(walker.commands))
    return Proof(
        True,
        "read-only",
        tuple(walker.commands),
        tuple(dict.fromkeys(walker.paths)),
        tuple(dict.fromkeys(walker.dynamic)),
        tuple(dict.fromkeys(walker.reads)),
        tuple(dict.fromkeys(walker.objects)),
        walker.history,
    )


def check(command: str, *, extra: ReadOnlyRule | None = None) -> Proof:
    """Prove `command` read-only or say why not; `extra` may declare simple commands the
    rules do not know read-only (extra.py). Never raises."""
    try:
        return _proof(command, extra)
    except RecursionError:
        return Proof(False, "too deeply nested")
    except Exception:
        return Proof(False, "internal error")
