"""`python -m qshell`: the same entry point as the `qshell` console script."""

from qshell.cli import entry

entry()
