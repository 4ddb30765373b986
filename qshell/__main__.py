"""`python -m qshell`: the same entry point as the `qshell` console script.

`python -m` puts the working directory first on `sys.path`; qshell is started inside the
user's project, so that entry is taken off again (unless qshell itself is imported from
there, as in its own checkout): a repository's own modules and package metadata must not
shadow qshell's or be found as its plugins.
"""

import os
import sys


def _without_working_directory(path: list[str]) -> list[str]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cwd = os.getcwd()
    kept = []
    for item in path:
        resolved = os.path.abspath(item or ".")
        if resolved == cwd and resolved != here:
            continue
        kept.append(item)
    return kept


sys.path[:] = _without_working_directory(sys.path)

from qshell.cli import entry  # noqa: E402  (after sys.path is cleaned)

entry()
