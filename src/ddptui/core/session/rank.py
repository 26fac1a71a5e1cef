"""`Rank`: one rank as the core knows it — its transport, its output, and its state.

Every state change of a rank happens here, through `RankState`'s typed transitions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from ddptui.core.model.inner_error import innermost
from ddptui.core.model.marks import MarkReader
from ddptui.core.model.output import OutputLog
from ddptui.core.model.stacks import is_library
from ddptui.core.model.state import PAUSED, RUNNING, WAITING, Crash, Frame, Phase, RankState, failed
from ddptui.core.transport.interface import RankTransport
from ddptui.rank.protocol import Crashed, Exited, Identity, Message, Paused, Running

_TRAILING_ESCAPES = re.compile(rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b[=>])*\Z")
PROMPT_GRACE = 1.0
"""Seconds to wait for the prompt's text after the side channel said `paused`."""


def crash_site(frames: tuple[Frame, ...]) -> Frame | None:
    """Where to say a rank crashed: the innermost frame of the user's code (else the innermost)."""
    user = [frame for frame in frames if not is_library(frame.file)]
    candidates = user or list(frames)
    return candidates[-1] if candidates else None


@dataclass(frozen=True)
class Attempt:
    """An earlier process of a rank, before its job's launcher restarted it (`torchrun --max-restarts`)."""

    number: int
    """1 for the rank's first process, 2 for the one after the first restart, ..."""
    state: RankState
    """How it ended."""
    failed_at: float | None
    """When the core learnt it failed (see `Rank.failed_at`)."""
    identity: Identity | None


class Rank:
    """A rank: what it printed, what its debugger is doing, and the transport that reaches it."""

    def __init__(
        self, index: int, transport: RankTransport, on_change: Callable[[Rank], None], mark_key: bytes = b""
    ) -> None:
        self.index = index
        self.transport = transport
        self.output = OutputLog()
        self.state = RankState()
        self.prompt = f"(Pdb r{index}) ".encode()
        self.paused_count = 0
        """How many `paused` events arrived: a broadcast waits for this to grow."""
        self.phase_since = time.monotonic()
        self.paused_at = 0.0
        self.why = ""
        """Why its prompt opened, as the stop's first `paused` said (`Paused.why`: `breakpoint`,
        `post-mortem`, `interrupt`); empty for a step's end, and for the events after the first."""
        self.input_mark = 0
        """Output offset when input was last sent: a prompt before it is an old one."""
        self.failed_at: float | None = None
        """When the core learnt the rank failed (its exception, or a non-zero exit)."""
        self.crash_frames: tuple[Frame, ...] = ()
        """The traceback of the rank's uncaught exception, outermost first."""
        self.final_collectives: list[object] | None = None
        """The collective log the rank sent as it exited."""
        self.fatal_dump: Callable[[], str | None] = lambda: None
        """Where the rank died of a fatal signal, asked when it is killed by one."""
        self.marks = MarkReader(mark_key)
        """Takes the events the rank says in its terminal (under the session's key) out of its output."""
        self.attempts: list[Attempt] = []
        """The rank's earlier processes, first first, when its launcher restarted it."""
        self._mark_key = mark_key
        self._on_change = on_change
        self._prompt_seen: tuple[int, int, bool] = (-1, -1, False)
        """`prompt_shown`'s last answer, with the output end and input mark it was given for."""
        transport.on_message = self.on_message
        transport.on_exit = self.on_exit

    def __repr__(self) -> str:
        """`<Rank 0 paused at train.py:12>`."""
        return f"<Rank {self.index} {self.state.describe()}>"

    @property
    def attempt(self) -> int:
        """Which process of the rank this is: 1, or more after its launcher restarted it."""
        return len(self.attempts) + 1

    def restart(self, transport: RankTransport) -> None:
        """A new process takes the rank (its launcher restarted the job): the process before is
        kept in `attempts`, and what is known of the rank starts again, its output aside."""
        self.attempts.append(Attempt(self.attempt, self.state, self.failed_at, self.identity))
        self.transport = transport
        self.failed_at, self.crash_frames, self.final_collectives = None, (), None
        self.marks = MarkReader(self._mark_key)
        self.input_mark = self.output.end
        self._prompt_seen = (-1, -1, False)
        self.state = RankState()
        self.phase_since = time.monotonic()
        self._on_change(self)

    @property
    def identity(self) -> Identity | None:
        """Who the rank said it is (None until its link said hello)."""
        return self.transport.identity

    def _set(self, state: RankState) -> None:
        """Replace the state and tell the session (only when it changed)."""
        old = self.state
        if state.phase is old.phase and state == old:
            return
        if old.ended_by_ddptui and state.exit_code is None:
            return  # being ended: what it did when the user quit stays its state, until it exits
        if self.failed_at is None and (state.crash is not None or state.exit_code) and failed(state):
            self.failed_at = time.monotonic()
        if state.phase is not old.phase:
            self.phase_since = time.monotonic()
        self.state = state
        self._on_change(self)

    # -- what the rank says -----------------------------------------------------------------
    def on_message(self, message: Message) -> None:
        """Apply one event from the rank's link."""
        if isinstance(message, Paused):
            self.paused_count += 1
            self.paused_at = time.monotonic()
            self.why = message.why
            self._set(self.state.paused(message.frame, message.post_mortem))
        elif isinstance(message, Running):
            self.resumed()
        elif isinstance(message, Exited):
            self.final_collectives = message.collectives if isinstance(message.collectives, list) else None
        elif isinstance(message, Crashed):
            kind, text, self.crash_frames = innermost(message.type, message.message, message.frames)
            self._set(self.state.crashed(Crash(kind, text, crash_site(self.crash_frames))))

    def linked(self) -> None:
        """The rank's link said hello: it runs the user's code now (unless its first prompt,
        said in its terminal, was read before the hello)."""
        if self.state.phase is Phase.STARTING:
            self._set(self.state.running())
        else:
            self._on_change(self)  # who the rank is changed: the views show it

    def on_exit(self, status: int) -> None:
        """Record the exit status (negative: killed by that signal, and where if it was fatal)."""
        site = self.fatal_dump() if status < 0 and not self.state.ended_by_ddptui else None
        self._set(self.state.exited(status, site))

    # -- what the core sees -----------------------------------------------------------------
    def resumed(self) -> None:
        """A command was sent, the rank printed, or it used CPU: it is running (unless gone)."""
        state = self.state
        if state.exit_code is None and not (state.phase is RUNNING and state.waiting_in is None):
            self._set(state.running())

    def stalled(self, where: Frame | None, callee: str | None) -> None:
        """The rank is idle inside `callee` at `where` (a collective, a sleep, a lock)."""
        if self.state.alive and self.state.phase in (Phase.STARTING, Phase.RUNNING, Phase.WAITING):
            self._set(self.state.waiting(where, callee))

    def ending(self) -> None:
        """ddptui is ending the rank."""
        if self.state.alive:
            self._set(self.state.ending())

    def release(self, how: str) -> None:
        """ddptui hangs up on a rank on another node, which goes on as `how` says."""
        if self.state.alive:
            self._set(self.state.release(how))

    # -- the terminal -------------------------------------------------------------------------
    def received(self, data: bytes) -> None:
        """Record output; a waiting rank that prints is running again."""
        self.output.append(data)
        if self.state.phase is WAITING:
            self._set(self.state.running())

    def write(self, data: bytes) -> None:
        """Type bytes into the rank's terminal."""
        self.input_mark = self.output.end
        self.transport.write(data)

    def prompt_shown(self) -> bool:
        """True when the terminal's last text is this rank's prompt, printed after the last input.

        The side channel says `paused` before the pty's bytes are necessarily read: the prompt
        on screen is what says the command's output is all in. Asked again and again while a
        broadcast waits: the answer is kept until output or input moves on.
        """
        end, mark, shown = self._prompt_seen
        if end == self.output.end and mark == self.input_mark:
            return shown
        shown = self._prompt_at_end()
        self._prompt_seen = (self.output.end, self.input_mark, shown)
        return shown

    def _prompt_at_end(self) -> bool:
        """True when the output since the last input ends with the prompt (escape sequences aside)."""
        start = max(self.input_mark, self.output.end - 256)
        if self.output.ends_with(self.prompt, start):
            return True
        tail = self.output.since(start)
        if b"\x1b" not in tail[-16:]:
            return False
        tail = tail[: _TRAILING_ESCAPES.search(tail).start()]  # type: ignore[union-attr]
        return tail.endswith(self.prompt)

    def typing_at_prompt(self) -> bool:
        """True when the terminal's last line is the rank's pdb prompt and what was typed after it
        (not `interact`'s `>>>`, not a program reading its stdin)."""
        tail = self.output.tail(1024)
        return self.prompt in tail[tail.rfind(b"\n") + 1 :]

    def settled(self, now: float) -> bool:
        """Paused with its prompt on screen (or the prompt is overdue), waiting, or gone."""
        phase = self.state.phase
        if phase is PAUSED:
            return self.prompt_shown() or now - self.paused_at > PROMPT_GRACE
        return phase is WAITING or not self.state.alive
