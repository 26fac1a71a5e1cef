"""What a rank is doing, as one small immutable value the front ends render.

Every change of a rank's state is one of the named transitions below, applied by `Rank` only:
a misspelt field is a type error, not a silently ignored keyword.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass
from typing import NamedTuple

from ddptui.rank.paths import short_path
from ddptui.rank.protocol import Frame

__all__ = ["NO_STATUS", "Crash", "Frame", "Phase", "RankState", "describe_exit", "short_path"]


class Phase(enum.Enum):
    """The life of a rank, as the side channel and the process table tell it."""

    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    WAITING = "waiting"
    EXITED = "exited"
    CRASHED = "crashed"


STARTING, RUNNING, PAUSED, WAITING = Phase.STARTING, Phase.RUNNING, Phase.PAUSED, Phase.WAITING
"""The phases as module globals, for the code on a lockstep step's path (import them from here): a
member read through its enum class costs ten times as much (the metaclass has a `__getattr__`)."""


@dataclass(frozen=True)
class Crash:
    """The innermost uncaught exception of a rank, or the fatal signal that killed it."""

    type: str
    message: str
    where: Frame | None

    def __str__(self) -> str:
        """`NameError: name 'c' is not defined (train.py:12)`."""
        message = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if len(message) > 160:
            message = message[:157] + "..."
        text = f"{self.type}: {message}" if message else self.type
        return f"{text} ({self.where})" if self.where else text


NO_STATUS = -1000
"""The exit status of a rank ddptui did not spawn whose link closed without saying how it exited
(killed by a signal, or `os._exit`): not ddptui's child, so the kernel's status is not ddptui's."""


def describe_exit(code: int) -> str:
    """`exited 3`, or `killed by SIGKILL` for a negative (signal) status."""
    if code == NO_STATUS:
        return "gone (no exit status: killed, or os._exit)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited {code}"


class RankState(NamedTuple):
    """One rank's state; replaced, never mutated, so views can compare old and new.

    A named tuple, not a frozen dataclass: a lockstep step makes two per rank, and a frozen
    dataclass's `__init__` (a `object.__setattr__` per field) costs far more than a tuple's.
    """

    phase: Phase = Phase.STARTING
    location: Frame | None = None
    crash: Crash | None = None
    exit_code: int | None = None
    waiting_in: str | None = None
    post_mortem: bool = False
    ended_by_ddptui: bool = False
    fatal_site: str | None = None
    """Where a fatal signal hit, `at train.py:4 (in __init__)`, when the rank died of one."""
    released: str = ""
    """How a rank on another node was left when ddptui hung up (`left running undebugged`), or empty."""

    @property
    def alive(self) -> bool:
        """True until the rank's process has exited."""
        return self.exit_code is None

    @property
    def at_prompt(self) -> bool:
        """True when the rank's debugger is reading a command."""
        return self.phase is Phase.PAUSED

    @property
    def active(self) -> bool:
        """True for a live rank starting, running or waiting: one that can stall.

        Phases compared by identity: an enum member's hash is Python code, and a lockstep step
        asks this twice a rank.
        """
        phase = self.phase
        return self.exit_code is None and (
            phase is Phase.RUNNING or phase is Phase.WAITING or phase is Phase.STARTING
        )

    # -- transitions (the only ways a state changes) -----------------------------------------
    def running(self) -> RankState:
        """Resumed by a command, or seen making progress again."""
        # tuple.__new__ straight: a named tuple's own __new__ is one more Python call, and every
        # rank makes a `running` and a `paused` each lockstep step
        return _new(RankState, (RUNNING, self[1], self[2], None, None, False, self[6], None, ""))

    def paused(self, where: Frame, post_mortem: bool) -> RankState:
        """The debugger's prompt opened at `where`."""
        return _new(RankState, (PAUSED, where, self[2], None, None, post_mortem, self[6], None, ""))

    def waiting(self, where: Frame | None, callee: str | None) -> RankState:
        """Idle while running: blocked at `where`, inside `callee` (a collective, a sleep)."""
        return RankState(Phase.WAITING, where, self.crash, None, callee, False, self.ended_by_ddptui)

    def crashed(self, crash: Crash) -> RankState:
        """The user's code raised; the rank stays alive in post-mortem until it exits."""
        where = crash.where or self.location
        return RankState(
            self.phase, where, crash, None, self.waiting_in, self.post_mortem, self.ended_by_ddptui
        )

    def ending(self) -> RankState:
        """ddptui is ending the rank (teardown): keeps the phase, which is what the user needs."""
        return RankState(self.phase, self.location, self.crash, None, self.waiting_in, self.post_mortem, True)

    def release(self, how: str) -> RankState:
        """ddptui hung up on a rank it cannot end (on another node): it goes on as `how` says."""
        return self._replace(released=how)

    def exited(self, code: int, fatal_site: str | None = None) -> RankState:
        """The process is gone with status `code` (negative: killed by that signal)."""
        if self.released:  # only its link is gone: the rank's fate is what it was told
            return self
        phase = Phase.CRASHED if self.crash or (code < 0 and fatal_site) else Phase.EXITED
        if self.ended_by_ddptui:
            phase = self.phase
        return RankState(
            phase, self.location, self.crash, code, self.waiting_in, False, self.ended_by_ddptui, fatal_site
        )

    # -- words ---------------------------------------------------------------------------------
    def describe(self) -> str:
        """The state in words: `paused at train.py:14`, `crashed NameError: ...`, `exited 0`."""
        text = self._describe_phase()
        if self.released:
            return f"{text} ({self.released})"
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
        if self.exit_code is not None and self.phase in (Phase.EXITED, Phase.CRASHED):
            text = describe_exit(self.exit_code)
            return f"{text} {self.fatal_site}" if self.fatal_site else text
        return str(self.phase.value)


_new = tuple.__new__


def failed(state: RankState) -> bool:
    """True for a rank that crashed or exited non-zero on its own (not ended by ddptui)."""
    if state.crash is not None:
        return True
    return bool(state.exit_code) and not state.ended_by_ddptui
