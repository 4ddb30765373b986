"""Polling for tests: wait until a condition holds, or a generous bound passes.

A test that waits on another thread or process polls a condition instead of sleeping a fixed
time. The bounds are generous because the machines are shared and noisy; no test asserts a
timing with them. Any thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

POLL_S = 0.05
DEFAULT_TIMEOUT_S = 10.0

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], timeout_s: float = DEFAULT_TIMEOUT_S, poll_s: float = POLL_S
) -> T:
    """Call `condition` until it returns something true or `timeout_s` has passed; its last
    value (so `assert wait_until(...)` for a flag, or the found items themselves)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(poll_s)
