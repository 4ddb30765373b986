"""Output capping shared by the tools: keep the head and the tail, say what was cut.

`cap_middle` trims finished text; `HeadTailBuffer` bounds memory while a command's output
is still streaming, keeping only the first and last bytes. Neither decides limits (callers
pass `ctx.max_output_chars`). `cap_middle` is pure; a `HeadTailBuffer` belongs to one
writer thread and is read only after that writer has stopped.
"""

from __future__ import annotations


def omitted_note(count: int, unit: str) -> str:
    return f"\n[... {count} {unit} omitted ...]\n"


def cap_middle(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its head and tail around an omission note."""
    if len(text) <= max_chars:
        return text
    half = max(max_chars // 2, 1)
    omitted = len(text) - 2 * half
    return text[:half] + omitted_note(omitted, "characters") + text[-half:]


class HeadTailBuffer:
    """Collects a byte stream, keeping at most `head_bytes` + `tail_bytes` of it."""

    def __init__(self, head_bytes: int, tail_bytes: int) -> None:
        self._head_limit = head_bytes
        self._tail_limit = tail_bytes
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    def write(self, data: bytes) -> None:
        self.total_bytes += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    @property
    def omitted_bytes(self) -> int:
        return self.total_bytes - len(self._head) - len(self._tail)

    def text(self) -> str:
        """The kept output decoded as UTF-8 (bad bytes replaced), with a note for any gap."""
        if self.omitted_bytes == 0:
            return bytes(self._head + self._tail).decode("utf-8", errors="replace")
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        return head + omitted_note(self.omitted_bytes, "bytes") + tail
