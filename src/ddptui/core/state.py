"""What a rank is doing, as one small immutable value the front ends render."""

from __future__ import annotations

import enum
import functools
import os
import signal
from dataclasses import dataclass


class Phase(enum.Enum):
    """The life of a rank, as the side channel and the process table tell it."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"
    EXITED = "exited"
    CRASHED = "crashed"


@functools.lru_cache(maxsize=1024)
def short_path(path: str) -> str:
    """A path as users read it: relative to the working directory when inside it, else the name.

    Cached: ddptui never changes directory, and the rank bar asks on every redraw.
    """
    if not os.path.isabs(path):
        return path
    rel = os.path.relpath(path)
    return os.path.basename(path) if rel.startswith("..") else rel


@dataclass(frozen=True)
class Location:
    """A source position: file, line and function."""

    file: str
    line: int
    func: str = ""

    def __str__(self) -> str:
        """`train.py:12`, the form shown everywhere."""
        return f"{short_path(self.file)}:{self.line}"


@dataclass(frozen=True)
class Crash:
    """The innermost uncaught exception of a rank."""

    type: str
    message: str
    where: Location | None

    def __str__(self) -> str:
        """`NameError: name 'c' is not defined (train.py:12)`."""
        message = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if len(message) > 160:
            message = message[:157] + "..."
        text = f"{self.type}: {message}" if message else self.type
        return f"{text} ({self.where})" if self.where else text


def describe_exit(code: int) -> str:
    """`exited 3`, or `killed by SIGKILL` for a negative (signal) status."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited {code}"


@dataclass(frozen=True)
class RankState:
    """One rank's state; replaced, never mutated, so views can compare old and new."""

    phase: Phase = Phase.STARTING
    location: Location | None = None
    crash: Crash | None = None
    exit_code: int | None = None
    waiting_in: str | None = None
    post_mortem: bool = False
    ended_by_ddptui: bool = False

    @property
    def alive(self) -> bool:
        """True until the rank's process has exited."""
        return self.exit_code is None

    @property
    def at_prompt(self) -> bool:
        """True when the rank's debugger is reading a command."""
        return self.phase is Phase.PAUSED

    def evolve(self, **changes: object) -> RankState:
        """A copy with some fields changed (cheaper than dataclasses.replace, on every event)."""
        state = object.__new__(RankState)
        state.__dict__.update(self.__dict__, **changes)
        return state

    def describe(self) -> str:
        """The state in words: `paused at train.py:14`, `crashed NameError: ...`, `exited 0`."""
        text = self._describe_phase()
        return f"{text} (ended by ddptui)" if self.ended_by_ddptui else text

    def _describe_phase(self) -> str:
        """The phase part of `describe`."""
        if self.crash is not None:
            suffix = ", in post-mortem" if self.alive else ""
            return f"crashed {self.crash}{suffix}"
        if self.phase is Phase.PAUSED and self.location:
            return f"paused at {self.location}"
        if self.phase is Phase.WAITING:
            where = f" at {self.location}" if self.location else ""
            return f"waiting{where}" + (f" in {self.waiting_in}" if self.waiting_in else "")
        if self.phase is Phase.EXITED and self.exit_code is not None:
            return describe_exit(self.exit_code)
        return str(self.phase.value)
