"""The garbage collector at start-up: off while qshell starts, on (and the start frozen) once a front-end runs.

Starting qshell imports some two hundred modules and builds their classes, tables and
regular expressions: many allocations, nearly all of which live for the whole run. The
cyclic collector runs dozens of times meanwhile and frees next to nothing, about 7 % of
the CPU to the first prompt (bench/startup.py). So `entry` turns it off (`pause`), and each
front-end turns it back on as it starts serving (`resume`), first moving everything
start-up made to the permanent generation, which later collections no longer walk. A
front-end that never calls `resume` would run without the collector: every front-end
path in cli.py does. Main thread.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn the collector off for start-up."""
    global _paused
    _paused = gc.isenabled()
    gc.disable()


def resume() -> None:
    """Start-up is over: keep what it made out of later collections, and collect again."""
    global _paused
    if _paused:
        gc.freeze()
        gc.enable()
        _paused = False
