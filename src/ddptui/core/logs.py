"""`--log-dir`: each rank's raw terminal output, and a log of every state change."""

from __future__ import annotations

import os
import time
from typing import IO

from ddptui.core.launch import LaunchError
from ddptui.core.state import RankState


class SessionLog:
    """Writes `rank-N.log` (the bytes each rank's terminal printed) and `session.log` (states)."""

    def __init__(self, directory: str, nproc: int) -> None:
        try:
            os.makedirs(directory, exist_ok=True)
            self._ranks: list[IO[bytes]] = [
                open(os.path.join(directory, f"rank-{rank}.log"), "wb")  # noqa: SIM115 (open for the session)
                for rank in range(nproc)
            ]
            self._events: IO[str] = open(  # noqa: SIM115 (open for the session)
                os.path.join(directory, "session.log"), "w", encoding="utf-8"
            )
        except OSError as exc:
            raise LaunchError(f"cannot write logs to --log-dir {directory}: {exc.strerror}") from None

    def output(self, rank: int, data: bytes) -> None:
        """Append what a rank printed."""
        self._ranks[rank].write(data)

    def state(self, rank: int, state: RankState) -> None:
        """Record a state change with the time."""
        stamp = time.strftime("%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}"
        self._events.write(f"{stamp} rank {rank}: {state.describe()}\n")
        self._events.flush()

    def close(self) -> None:
        """Flush and close every file."""
        for log in self._ranks:
            log.close()
        self._events.close()
