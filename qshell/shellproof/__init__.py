"""The shell read-only proof: whether a bash command line can only read, and how to run it.

A leaf package: it imports nothing else of qshell. `check(command)` parses the line with
tree-sitter-bash and returns a `Proof` — read-only or not, the first reason why not, and
what the command reads, for the caller's read-scope rules: as text (literal paths, and
the source of paths known only at run time) and as `Read`s that carry the source bash will
expand and whether the command walks the tree below a path. A command proven read-only is
run by the caller with `sanitized_env(...)` and at most `SHELL_TIMEOUT_S`. Inside:
`walker.py` walks statements, `cond.py` reads `[[ … ]]` as bash does, `words.py` proves
single words, `quoting.py` decodes them as bash does, `syntax.py` holds node tables and
where bash splits text, `rules/` the per-command allowlists, `extra.py` the forms a caller declares read-only (`check(command, extra=…)`,
for gate plugins) and `env.py` the environment; `reach.py` (`reach(command)`) says whether a line
that is not read-only plainly needs the network or a person, for speculation.
Its exceptions are `ShellproofError`s (`Unproven`, which `check` turns into a `Proof`).
Nothing here runs a command; `check` is safe from any thread.
"""

from qshell.shellproof.env import DEFAULT_PATH, GIT_HARDENING, SHELL_TIMEOUT_S, sanitized_env
from qshell.shellproof.extra import ReadOnlyRule
from qshell.shellproof.reach import reach
from qshell.shellproof.rules import Read, ShellproofError
from qshell.shellproof.syntax import Proof
from qshell.shellproof.walker import MAX_COMMAND_BYTES, check

__all__ = [
    "DEFAULT_PATH",
    "GIT_HARDENING",
    "MAX_COMMAND_BYTES",
    "SHELL_TIMEOUT_S",
    "Proof",
    "Read",
    "ReadOnlyRule",
    "ShellproofError",
    "check",
    "reach",
    "sanitized_env",
]
