"""reach(): whether a command line plainly needs the world outside a sandbox, or a person.

A speculation may run a command that is not proven read-only on a kernel overlay with no
network; one that installs packages, downloads (`curl`, `wget`, `git fetch/pull/push`),
logs in elsewhere (`ssh`, `scp`), drives a container engine or waits for a person (an
editor, a pager, `sudo`) would only fail there, or show a result built on a failed
download, so the caller stops at it instead. `reach(command)` parses the line with the
same tree-sitter-bash grammar as the proof (walker.py) and looks at every simple command in
it — in pipelines, lists, subshells and substitutions — past wrappers (`env`, `time`,
`nice`, `timeout`, `xargs`, `nohup`, `command`, `exec`), naming the first such command, or
None. It is a judgement of usefulness, not of safety (the sandbox has no network whatever
this says), so a word it cannot read is skipped. Pure; any thread (one parser per thread).
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from qshell.shellproof.walker import parser

NETWORK_COMMANDS = frozenset(
    {"curl", "wget", "ssh", "scp", "sftp", "rsync", "ftp", "telnet", "nc", "ncat", "ping"}
    | {"docker", "podman", "kubectl", "helm", "gh", "aws", "gcloud", "az", "brew", "apt"}
    | {"apt-get", "dnf", "yum", "pacman", "apk", "snap", "pipx", "conda", "mamba", "npx"}
)
INTERACTIVE_COMMANDS = frozenset(
    {"vi", "vim", "nvim", "nano", "emacs", "less", "more", "man", "top", "htop", "sudo", "su"}
    | {"passwd", "watch", "tmux", "screen", "fzf"}
)
# subcommands that reach the network, per tool (the first word after the tool's options)
NETWORK_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset({"fetch", "pull", "push", "clone", "ls-remote", "submodule", "remote"}),
    "pip": frozenset({"install", "download", "wheel", "index", "search"}),
    "pip3": frozenset({"install", "download", "wheel", "index", "search"}),
    "uv": frozenset({"pip", "add", "sync", "lock", "tool", "run", "venv", "python"}),
    "poetry": frozenset({"add", "install", "update", "lock", "publish"}),
    "npm": frozenset({"install", "i", "ci", "add", "update", "publish", "exec", "create"}),
    "pnpm": frozenset({"install", "i", "add", "update", "dlx", "create"}),
    "yarn": frozenset({"install", "add", "upgrade", "dlx", "create"}),
    "cargo": frozenset({"install", "add", "fetch", "update", "publish", "search"}),
    "go": frozenset({"get", "install", "download"}),
    "gem": frozenset({"install", "update", "fetch"}),
    "bundle": frozenset({"install", "update"}),
    "composer": frozenset({"install", "require", "update"}),
}
NETWORK_MODULES = frozenset({"pip", "ensurepip", "venv"})  # python -m …: venv installs pip
WRAPPERS = frozenset({"env", "time", "nice", "nohup", "command", "exec", "xargs", "stdbuf"})
_WRAPPER_WITH_ARG = frozenset({"timeout"})


def reach(command: str) -> str | None:
    """What in `command` needs the outside world or a person ("git fetch", …), or None."""
    try:
        tree = parser().parse(command.encode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeError):
        return None
    for words in _simple_commands(tree.root_node):
        found = _judge(words)
        if found is not None:
            return found
    return None


def _simple_commands(node: Node) -> Iterator[list[str | None]]:
    if node.type == "command":
        yield [
            _literal(child) for child in node.named_children if child.type != "variable_assignment"
        ]
    for child in node.children:
        yield from _simple_commands(child)


def _literal(node: Node) -> str | None:
    """A word's text when bash would not expand it (else None)."""
    if node.type == "command_name" and node.named_children:
        node = node.named_children[0]
    text = (node.text or b"").decode("utf-8", "surrogateescape")
    if node.type == "word" and not any(c in text for c in "$`*?[{\\"):
        return text
    if node.type == "raw_string":
        return text[1:-1]
    if node.type == "string" and all(c.type == "string_content" for c in node.named_children):
        return text[1:-1]
    return None


def _judge(words: list[str | None]) -> str | None:
    words = _unwrapped(words)
    if not words or words[0] is None:
        return None
    name = words[0].rsplit("/", 1)[-1]
    if name in NETWORK_COMMANDS or name in INTERACTIVE_COMMANDS:
        return name
    rest: list[str | None] = [w for w in words[1:] if w is not None]
    if name.startswith("python") and len(rest) >= 2 and rest[0] == "-m":
        if rest[1] in NETWORK_MODULES or rest[1] in NETWORK_SUBCOMMANDS:
            return _judge([*rest[1:]]) or f"{name} -m {rest[1]}"
        return None
    sub = NETWORK_SUBCOMMANDS.get(name)
    if sub is None:
        return None
    first = _subcommand(name, rest)
    return f"{name} {first}" if first in sub else None


def _unwrapped(words: list[str | None]) -> list[str | None]:
    while words and words[0] is not None:
        name = words[0].rsplit("/", 1)[-1]
        if name in WRAPPERS or name in _WRAPPER_WITH_ARG:
            words = words[1:]
            while words and words[0] is not None and (words[0].startswith("-") or "=" in words[0]):
                words = words[1:]
            if name in _WRAPPER_WITH_ARG and words:
                words = words[1:]  # the duration
            continue
        break
    return words


def _subcommand(name: str, rest: list[str | None]) -> str | None:
    """The first word after the tool's own options (`git -C dir fetch` → fetch)."""
    skip_next = False
    for word in rest:
        if word is None:
            continue
        if skip_next:
            skip_next = False
            continue
        if word.startswith("-"):
            skip_next = name == "git" and word in ("-C", "-c", "--git-dir", "--work-tree")
            continue
        return word
    return None
