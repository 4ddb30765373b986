"""Between the synchronous core and the ACP server's asyncio loop.

`TurnEvents` runs a turn's event generator in a worker thread (the loop blocks on the
provider, the tools and permission futures) and hands its events to the asyncio loop
through a queue; consecutive text or reasoning deltas that are already waiting are merged
into one, so a fast stream costs fewer notifications. `ClientFiles` is the other way
round: the tools' `read` / `write` calls, made in a worker thread, become
`fs/read_text_file` / `fs/write_text_file` requests on the loop and block until the client
answers (at most `CLIENT_FS_TIMEOUT_S`, or until the prompt is cancelled), their failures
raised as OSError as a file read would. Neither may be called from the loop's own thread
for a blocking call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Protocol

from qshell.agent.events import Event, FailureKind, ReasoningDelta, TextDelta, TurnFailed

log = logging.getLogger(__name__)

CLIENT_FS_TIMEOUT_S = 60.0
_DONE = object()


class TurnEvents:
    """A turn's events, produced in a worker thread, consumed on the asyncio loop."""

    def __init__(self, events: Iterator[Event], loop: asyncio.AbstractEventLoop) -> None:
        self._events = events
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._held: Any = None  # taken off the queue but not merged: the next item
        self._worker = threading.Thread(target=self._pump, name="qshell-acp-turn", daemon=True)
        self._worker.start()

    def _put(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed loop: the server is gone
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def _pump(self) -> None:
        try:
            for event in self._events:
                self._put(event)
        except Exception as exc:  # a bug must end the turn as a failure, not hang it
            log.exception("turn crashed")
            self._put(TurnFailed(FailureKind.ERROR, f"internal error: {exc}"))
        finally:
            self._put(_DONE)

    async def next(self) -> Event | None:
        """The next event (deltas already waiting merged into it); None at the end."""
        item = self._held if self._held is not None else await self._queue.get()
        self._held = None
        if item is _DONE:
            return None
        while isinstance(item, TextDelta | ReasoningDelta) and not self._queue.empty():
            following = self._queue.get_nowait()
            if type(following) is not type(item):
                self._held = following  # the next call starts with it
                break
            item = type(item)(item.text + following.text)
        return item  # type: ignore[no-any-return]


class FileClient(Protocol):
    """The client side of the connection, as far as files go (the SDK's connection)."""

    def read_text_file(self, *, session_id: str, path: str) -> Coroutine[Any, Any, Any]: ...

    def write_text_file(
        self, *, session_id: str, path: str, content: str
    ) -> Coroutine[Any, Any, Any]: ...


class ClientFiles:
    """The client's `fs/*` methods as blocking calls for the tools' worker threads.
    `session_id` is set once the session it serves has its id."""

    def __init__(self, client: FileClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop
        self.session_id = ""
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Stop waiting for the requests still out (the prompt was cancelled): each
        raises OSError in its tool at once; a late answer is dropped."""
        with self._lock:
            pending, self._pending = self._pending, set()
        for future in pending:
            future.cancel()

    def read(self, path: Path) -> str:
        coro = self._client.read_text_file(session_id=self.session_id, path=str(path))
        response = self._wait(coro, path, "read")
        return str(response.content)

    def write(self, path: Path, text: str) -> None:
        coro = self._client.write_text_file(
            session_id=self.session_id, path=str(path), content=text
        )
        self._wait(coro, path, "write")

    def _wait(self, coro: Coroutine[Any, Any, Any], path: Path, verb: str) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        with self._lock:
            self._pending.add(future)
        try:
            return future.result(CLIENT_FS_TIMEOUT_S)
        except FutureTimeout:
            future.cancel()
            raise OSError(f"the editor did not {verb} {path} in time") from None
        except FutureCancelled:
            raise OSError(f"cancelled while the editor was to {verb} {path}") from None
        except OSError:
            raise
        except Exception as exc:  # the client answered with an error
            raise OSError(f"the editor could not {verb} {path}: {exc}") from None
        finally:
            with self._lock:
                self._pending.discard(future)
