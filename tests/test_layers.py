"""The import arrows point one way: ui → followup → agent → llm, tools; leaves import nothing above.

Walks every module's imports with ast (lazy imports inside functions and TYPE_CHECKING
blocks count too), like httpx's export test keeps `__all__` honest; the modules of agent,
latency and permissions import each other without a circle. ARCHITECTURE.md draws the
same rules.
"""

from __future__ import annotations

from tests.imports import imports, modules

# a module under the key may import, of qshell, only its own package and these prefixes
LEAVES = {
    "qshell.shellproof": (),
    "qshell.overlay": ("qshell.dirs", "qshell.tools"),
    "qshell.errors": (),
    "qshell.dirs": (),
    "qshell.jsonl": (),
    "qshell.cancel": ("qshell.errors",),
    "qshell.config": ("qshell.dirs", "qshell.errors", "qshell.settings_trust"),
    "qshell.settings_trust": (),
    "qshell.telemetry": ("qshell.dirs", "qshell.jsonl"),
    "qshell.plugins": ("qshell.dirs", "qshell.errors", "qshell.telemetry"),
    "qshell.sandbox": ("qshell.secret_names",),
    "qshell.prompts": (),
    "qshell.redaction": (),
    "qshell.secret_names": (),
    "qshell.extras": (),
}
# a module under the key may not import anything under these prefixes
ABOVE_AGENT = (
    "qshell.followup",
    "qshell.ui",
    "qshell.acp",
    "qshell.cli",
    "qshell.compose",
    "qshell.sessions",
    "qshell.providers",
)
FORBIDDEN = {
    "qshell.llm": (
        "qshell.agent",
        "qshell.tools",
        "qshell.overlay",
        "qshell.shellproof",
        *ABOVE_AGENT,
    ),
    "qshell.tools": (
        "qshell.agent",
        "qshell.overlay",
        "qshell.shellproof",
        "qshell.sandbox",
        "qshell.llm",
        *ABOVE_AGENT,
    ),
    "qshell.agent": (*ABOVE_AGENT, "qshell.overlay"),
    # what may run and where: asked by the loop and the speculative gate, it asks neither
    "qshell.permissions": (
        *ABOVE_AGENT,
        "qshell.agent",
        "qshell.latency",
        "qshell.overlay",
        "qshell.llm",
    ),
    # the latency plan: used by the loop and its session, it never drives a turn itself
    "qshell.latency": (
        *ABOVE_AGENT,
        "qshell.overlay",
        "qshell.agent.loop",
        "qshell.agent.conversation",
    ),
    "qshell.followup": (
        "qshell.ui",
        "qshell.acp",
        "qshell.cli",
        "qshell.compose",
        "qshell.sessions",
        "qshell.providers",
    ),
    "qshell.compose": ("qshell.ui", "qshell.acp", "qshell.cli"),
    "qshell.sessions": ("qshell.ui", "qshell.acp", "qshell.cli", "qshell.compose"),
    "qshell.ui": ("qshell.acp",),
}
# what a banned prefix above still allows: the value types of llm/messages.py
EXCEPTIONS = {"qshell.tools": ("qshell.llm.messages",), "qshell.ui": ("qshell.llm.messages",)}
# the command line's modules: each may use the argument definitions, none its caller
COMMAND_LINE = ("qshell.cli", "qshell.commands", "qshell.completions", "qshell.arguments")
FRONT_ENDS = ("qshell.ui", "qshell.acp")  # the terminal front-ends and the ACP agent
# front-ends render events and drive controllers: they never reach a provider, a tool, the
# proof, the overlay, or build what composition builds
UI_FORBIDDEN = (
    "qshell.llm",
    "qshell.tools",
    "qshell.shellproof",
    "qshell.overlay",
    "qshell.compose",
    "qshell.sessions",
    "qshell.providers",
    "qshell.telemetry",
    "qshell.agent.loop",
    "qshell.permissions",
    "qshell.latency",
    "qshell.agent.session",
)


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def all_modules() -> dict[str, set[str]]:
    """Each module and every qshell module or name it imports (see tests/imports.py)."""
    return {name: {i.target for i in imports(path)} for name, path in modules().items()}


def test_leaves_import_nothing_above_them():
    problems = []
    for name, imported in all_modules().items():
        for leaf, allowed in LEAVES.items():
            if not under(name, leaf):
                continue
            for target in imported - {"qshell", "qshell.__version__"}:
                if not under(target, leaf) and not any(under(target, a) for a in allowed):
                    problems.append(f"{name} imports {target}")
    assert problems == []


def test_imports_point_one_way():
    problems = []
    for name, imported in all_modules().items():
        for prefix, banned in FORBIDDEN.items():
            if under(name, prefix):
                problems += [
                    f"{name} imports {t}"
                    for t in imported
                    if breaks(t, banned, EXCEPTIONS.get(prefix, ())) and not under(t, prefix)
                ]
    assert problems == []


def breaks(target: str, banned: tuple[str, ...], allowed: tuple[str, ...]) -> bool:
    banned_here = any(under(target, b) for b in banned)
    return banned_here and not any(under(target, a) for a in allowed)


def test_front_ends_import_no_provider_tool_or_wiring():
    problems = []
    for name, imported in all_modules().items():
        if any(under(name, front) for front in FRONT_ENDS):
            problems += [
                f"{name} imports {t}"
                for t in imported
                if breaks(t, UI_FORBIDDEN, EXCEPTIONS["qshell.ui"])
            ]
    assert problems == []


def test_the_command_line_modules_import_no_circle():
    graph = all_modules()
    uses = {
        m: {o for o in COMMAND_LINE if o != m and any(under(t, o) for t in graph[m])}
        for m in COMMAND_LINE
    }

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in uses[start]
        )

    assert [m for m in COMMAND_LINE if reaches(m, m)] == []
    assert uses["qshell.arguments"] == set()


def test_version_needs_no_heavy_imports():
    import subprocess
    import sys

    code = "import sys, qshell.cli; print(sorted(m for m in ('httpx', 'pydantic', 'rich', 'prompt_toolkit') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# packages whose modules must import each other without a circle
ACYCLIC = ("qshell.agent", "qshell.latency", "qshell.permissions")


def test_the_agent_latency_and_permissions_modules_import_no_circle():
    inside = {n for n in modules() if any(under(n, p) for p in ACYCLIC)}
    graph = {
        name: {t for t in imported if t in inside and t != name}
        for name, imported in all_modules().items()
        if name in inside
    }
    circles = []
    state: dict[str, str] = {}  # "open" while on the walk's path, then "done"

    def walk(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                circles.append(" → ".join([*path[path.index(target) :], target]))
            elif target not in state:
                walk(target, [*path, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert circles == []
