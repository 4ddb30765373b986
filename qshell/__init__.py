"""qshell: a terminal LLM coding agent built for speed.

This package root only carries the version so that `qshell --version` stays fast; every
heavy module (httpx, pydantic, rich, prompt_toolkit) is imported lazily by the code that
needs it.
"""

__version__ = "0.1.0"
