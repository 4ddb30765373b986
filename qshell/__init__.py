"""qshell: a terminal LLM coding agent built for speed.

This package root only carries the version so that `qshell --version` stays fast; every
heavy module (httpx, pydantic, rich, prompt_toolkit) is imported lazily by the code that
needs it. One thing it does at import: httpx's package imports its own command-line client
(`httpx._main`, which loads click, pygments and rich's progress bars and syntax
highlighting: about 30 ms of start-up) whenever those are installed, as rich is here; qshell
never runs that client, so an empty module stands in for it and httpx defines its fallback
`main` instead.
"""

import sys
import types

__version__ = "0.1.0"

if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", types.ModuleType("httpx._main"))
