"""`FakeNetworkStream`: what httpcore's network stream offers an abort handle, a socket
that records each `shutdown` and nothing else."""

from __future__ import annotations


class FakeSocket:
    """Records the `how` of each `shutdown` call."""

    def __init__(self) -> None:
        self.shutdowns: list[int] = []

    def shutdown(self, how: int) -> None:
        self.shutdowns.append(how)


class FakeNetworkStream:
    """Answers `get_extra_info("socket")` with its `FakeSocket`, anything else with None."""

    def __init__(self) -> None:
        self.sock = FakeSocket()

    def get_extra_info(self, info: str) -> object:
        return self.sock if info == "socket" else None
