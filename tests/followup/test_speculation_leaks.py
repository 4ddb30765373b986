"""Suggestion → speculation → typed-abort cycles leave nothing behind.

The Speculator runs in a real ThreadPoolExecutor, and the model's stream hangs until it is
cancelled, so every speculation is in flight when the user types over its suggestion. The
threads, the overlay directories and the open file descriptors are counted before and
after many cycles. Every wait is bounded; nothing asserts on elapsed time.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qshell.cancel import CancelToken
from qshell.config import Settings
from qshell.errors import Cancelled
from qshell.followup.speculation import Speculation
from qshell.followup.speculator import Speculator
from qshell.followup.states import Status
from qshell.llm.base import StreamEvent
from qshell.llm.messages import ChatRequest
from qshell.telemetry import Telemetry
from tests.followup.helpers import answered_conversation

CYCLES = 200
WORKERS = 2
POOL_PREFIX = "test-speculation-pool"
WAIT_S = 10.0
FD_DIR = Path("/proc/self/fd")
SUGGESTION = "run the tests"

pytestmark = pytest.mark.skipif(not FD_DIR.is_dir(), reason="counts fds through /proc")


class HangingProvider:
    """A model whose stream is entered, then hangs until the speculation is cancelled."""

    name = "hanging"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.calls = 0

    def stream(self, request: ChatRequest, cancel: CancelToken) -> Iterator[StreamEvent]:
        self.calls += 1
        self.entered.set()
        cancel.wait(30)
        raise Cancelled("cancelled")
        yield  # a generator, like every provider's stream


def open_fds() -> int:
    gc.collect()  # files an earlier test dropped without closing are closed now, not mid-count
    return len(os.listdir(FD_DIR))


def overlay_base() -> Path:
    return Path(tempfile.gettempdir()) / f"qshell-speculation-{os.getuid()}"


def leftovers(base: Path) -> list[Path]:
    """Everything under the overlay base but the (empty) directory of this process."""
    return [p for p in base.rglob("*") if p != base / str(os.getpid())]


def join_all(threads: set[threading.Thread]) -> None:
    """Let exiting threads finish, waiting at most WAIT_S for all of them together."""
    deadline = time.monotonic() + WAIT_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))


@pytest.fixture
def setup(tmp_path, monkeypatch):
    setup = answered_conversation(tmp_path, monkeypatch)
    return setup


@pytest.fixture
def hanging(setup) -> HangingProvider:
    provider = HangingProvider()
    setup.conversation.session.provider = provider  # the fork speculates with it
    return provider


@pytest.fixture
def telemetry(tmp_path) -> Iterator[Telemetry]:
    telemetry = Telemetry(tmp_path / "telemetry" / "events.jsonl")
    yield telemetry
    telemetry.close()


def records(telemetry: Telemetry) -> list[dict]:
    assert telemetry.path is not None
    lines = telemetry.path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "speculation"]


def speculator_for(setup, pool: ThreadPoolExecutor, telemetry, started: list[Speculation]):
    def submit(task):
        started.append(task.__self__)  # the Speculation whose run() is submitted
        return pool.submit(task)

    return Speculator(setup.conversation, Settings(), submit_task=submit, telemetry=telemetry)


def cycle(speculator: Speculator, provider: HangingProvider, started: list[Speculation]) -> None:
    """Show the suggestion, wait until its model request is in flight, then type over it."""
    provider.entered.clear()
    count = len(started)
    speculator.user_typed("")  # ghost text shows on an empty line
    speculator.start(SUGGESTION)
    assert len(started) == count + 1, "the suggestion was not speculated"
    assert provider.entered.wait(WAIT_S), "the speculation never reached the model"
    speculator.user_typed("x")  # returns at once; the run ends on its own thread
    spec = started[-1]
    assert spec.done.wait(WAIT_S) and spec.status is Status.ABORTED
    assert not spec.overlay.directory.exists()


def test_typed_abort_cycles_leave_no_thread_overlay_or_descriptor_behind(setup, hanging, telemetry):
    threads_before = set(threading.enumerate())
    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix=POOL_PREFIX)
    started: list[Speculation] = []
    speculator = speculator_for(setup, pool, telemetry, started)
    try:
        cycle(speculator, hanging, started)  # warm up: pool thread, telemetry file, imports
        base = overlay_base()
        assert base.is_dir() and leftovers(base) == []
        fds_before = open_fds()

        for _ in range(CYCLES):
            cycle(speculator, hanging, started)

        assert hanging.calls == CYCLES + 1
        assert leftovers(base) == []
        new = set(threading.enumerate()) - threads_before
        join_all({t for t in new if not t.name.startswith(POOL_PREFIX)})  # idle workers stay
        extra = set(threading.enumerate()) - threads_before
        assert all(t.name.startswith(POOL_PREFIX) for t in extra), extra
        assert len(extra) <= WORKERS
        assert open_fds() == fds_before
    finally:
        speculator.cancel()  # on a failure, nothing is left hanging in the pool
        pool.shutdown(wait=True)
    join_all(set(threading.enumerate()) - threads_before)
    assert set(threading.enumerate()) - threads_before == set()
    outcomes = [(r["outcome"], r["reason"], r["status"]) for r in records(telemetry)]
    assert outcomes == [("aborted", "typed", "aborted")] * (CYCLES + 1)


def test_a_suggestion_typed_over_and_shown_again_is_speculated_afresh(setup, hanging, telemetry):
    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix=POOL_PREFIX)
    started: list[Speculation] = []
    speculator = speculator_for(setup, pool, telemetry, started)
    try:
        cycle(speculator, hanging, started)
        # emptying the line brings the same suggestion back: it runs again, not the dead one
        hanging.entered.clear()
        speculator.user_typed("")
        speculator.start(SUGGESTION)
        assert hanging.entered.wait(WAIT_S)
        fresh = started[-1]
        assert len(started) == 2 and fresh.status is Status.RUNNING
        assert speculator.take(SUGGESTION) is fresh
        fresh.abort()
    finally:
        speculator.cancel()  # on a failure, nothing is left hanging in the pool
        pool.shutdown(wait=True)
    assert [r["reason"] for r in records(telemetry)] == ["typed"]  # each abort recorded once
