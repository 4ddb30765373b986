"""The text qshell sends the model, kept as files: `qshell/prompts/<name>.md`.

Prompts are data, not logic: each one is a Markdown file beside this module (the system
prompt and its concise and compact variants, the compaction, suggestion and prediction
requests, the edit tool's description), and the Python constants that name them
(`BASE_PROMPT`, `SUMMARY_REQUEST`, …) are read from here. Their bytes set the provider's
prompt-cache prefix, so `load` returns a file exactly as written, less the one newline
that ends it, and tests/test_prompts.py pins each file's digest. A file that names values
the code owns (`${OPEN}`, `${MAX_GUESSES}`) is a `string.Template` that `fill` completes;
a missing value is an error, never an empty gap. Read through `importlib.resources`, so an
installed wheel finds them too (pyproject's package data). Imports nothing of qshell;
`load` caches, and is safe from any thread.
"""

from __future__ import annotations

import functools
from importlib import resources
from string import Template


@functools.cache
def load(name: str) -> str:
    """The prompt in `<name>.md`, without the newline that ends the file."""
    text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return text.removesuffix("\n")


def fill(name: str, **values: object) -> str:
    """The prompt in `<name>.md` with its `${NAME}` placeholders set to `values`."""
    return Template(load(name)).substitute(values)
