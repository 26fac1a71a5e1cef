"""`Rank`: one rank process, its pty, its output and its state."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable

from ptyprocess import PtyProcess

from ddptui.core.output import OutputLog
from ddptui.core.stacks import is_library
from ddptui.core.state import Crash, Location, Phase, RankState

_TRAILING_ESCAPES = re.compile(rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b[=>])*\Z")
READ_CAP = 1 << 18
"""Bytes read from one pty per wake-up at most, so one flooding rank cannot starve the loop."""
PTY_CHUNK = 4095
"""The most a Linux pty returns per read: a shorter read means it is drained."""
PROMPT_GRACE = 1.0
"""Seconds to wait for the prompt's text after the side channel said `paused`."""


def crash_site(frames: object) -> Location | None:
    """Where to say a rank crashed: the innermost frame of the user's code (else the innermost)."""
    if not isinstance(frames, list) or not frames:
        return None
    sites = [Location(str(f[0]), int(f[1]), str(f[2])) for f in frames if isinstance(f, list) and len(f) == 3]
    user = [site for site in sites if not is_library(site.file)]
    return (user or sites)[-1] if sites else None


class Rank:
    """A rank: the process in its pty, the bytes it printed, and what its debugger is doing."""

    def __init__(self, index: int, proc: PtyProcess, on_change: Callable[[Rank], None]) -> None:
        self.index = index
        self.proc = proc
        self.pid: int = proc.pid
        self.fd: int = proc.fd
        self.output = OutputLog()
        self.state = RankState()
        self.prompt = f"(Pdb r{index}) ".encode()
        self.paused_count = 0
        """How many `paused` events arrived: a broadcast waits for this to grow."""
        self.phase_since = time.monotonic()
        self.paused_at = 0.0
        self.closed = False
        self.hello = False
        self.input_mark = 0
        """Output offset when input was last sent: a prompt before it is an old one."""
        """True once the rank's bootstrap ran (faulthandler is registered from then on)."""
        self._on_change = on_change
        self._pending = bytearray()

    def __repr__(self) -> str:
        """`<Rank 0 paused at train.py:12>`."""
        return f"<Rank {self.index} {self.state.describe()}>"

    def set_state(self, state: RankState) -> None:
        """Replace the state and tell the session."""
        if state.phase is not self.state.phase:
            self.phase_since = time.monotonic()
        self.state = state
        self._on_change(self)

    # -- side-channel events --------------------------------------------------------------
    def on_event(self, event: dict[str, object]) -> None:
        """Apply one side-channel event to the state."""
        kind = event.get("ev")
        if kind in ("hello", "running"):
            already = self.state.phase is Phase.RUNNING and self.state.waiting_in is None
            if self.state.alive and not already:
                self.set_state(self.state.evolve(phase=Phase.RUNNING, waiting_in=None))
        elif kind == "paused":
            self.paused_count += 1
            self.paused_at = time.monotonic()
            where = Location(str(event["file"]), int(event["line"]), str(event["func"]))  # type: ignore[call-overload]
            self.set_state(
                self.state.evolve(
                    phase=Phase.PAUSED,
                    location=where,
                    waiting_in=None,
                    post_mortem=bool(event.get("post_mortem")),
                )
            )
        elif kind == "exception":
            crash = Crash(
                str(event.get("type")), str(event.get("message", "")), crash_site(event.get("frames"))
            )
            self.set_state(self.state.evolve(crash=crash, location=crash.where or self.state.location))

    def on_exit(self, status: int) -> None:
        """Record the exit status (negative: killed by that signal).

        A rank ddptui ended keeps the phase it was in, which is what the user needs to know.
        """
        phase = Phase.CRASHED if self.state.crash else Phase.EXITED
        if self.state.ended_by_ddptui:
            phase = self.state.phase
        self.set_state(self.state.evolve(phase=phase, exit_code=status, post_mortem=False))

    # -- the terminal ---------------------------------------------------------------------
    def prompt_shown(self) -> bool:
        """True when the terminal's last text is this rank's prompt, printed after the last input.

        The side channel says `paused` before the pty's bytes are necessarily read: the prompt
        on screen is what says the command's output is all in.
        """
        tail = self.output.since(max(self.input_mark, self.output.end - 256))
        if tail.endswith(self.prompt):
            return True
        if b"\x1b" not in tail[-16:]:
            return False
        tail = tail[: _TRAILING_ESCAPES.search(tail).start()]  # type: ignore[union-attr]
        return tail.endswith(self.prompt)

    def settled(self, now: float) -> bool:
        """Paused with its prompt on screen (or the prompt is overdue), waiting, or gone."""
        if self.state.phase is Phase.PAUSED:
            return self.prompt_shown() or now - self.paused_at > PROMPT_GRACE
        return self.state.phase is Phase.WAITING or not self.state.alive

    def write(self, data: bytes) -> None:
        """Queue bytes for the rank's terminal; they are written as the pty accepts them."""
        if self.closed:
            return
        self._pending += data
        self.input_mark = self.output.end
        self.flush()

    def flush(self) -> bool:
        """Write what the pty takes now; True when bytes remain queued."""
        while self._pending and not self.closed:
            try:
                written = os.write(self.fd, self._pending)
            except BlockingIOError:
                return True
            except OSError:
                self._pending.clear()
                return False
            del self._pending[:written]
        return False

    def read(self) -> bytes:
        """Read all the pty has (up to READ_CAP); b'' when the terminal is closed (EIO) or drained.

        A pty returns at most 4095 bytes a read and holds about 14 KiB before the writer blocks:
        reading only once per wake-up would tie a rank's output speed to the UI's loop.
        """
        chunks = []
        size = 0
        while size < READ_CAP:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < PTY_CHUNK:
                break
        data = b"".join(chunks)
        if data:
            self.output.append(data)
        return data
