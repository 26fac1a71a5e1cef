"""`RankStates`: every rank's state as last told, shown in the rank bar, and the state grid's marks.

A step of N ranks is N state events: the rank bar and the state grid's marks are redrawn at most
once a frame from what was told, not once an event. A rank that crashes gets the keys (or a line
saying so, when they are in use elsewhere): `RankStates` posts which as a message to the app.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.timer import Timer

from ddptui.core.commands.context import Context
from ddptui.core.diagnosis.rootcause import Failure, one_bug, root_cause
from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.targets import by_words
from ddptui.core.model.text import inert
from ddptui.ui import messages
from ddptui.ui.rank_bar import RankBar, has_crashed
from ddptui.ui.state_grid_view import StateGridView

CRASH_NOTE_WAIT = 0.1
"""Seconds a crash waits for others to be said with it (ranks that hit one bug crash together)."""
MISSING_KINDS = ("hang", "early exit")
"""Collective verdicts whose suspects are ranks the others wait for."""

Post = Callable[[Message], object]
"""Post a message to the app."""
SetTimer = Callable[[float, Callable[[], None]], object]
"""Call back once after a delay (the app's `set_timer`)."""
Marks = tuple[int | None, set[int]]
"""The state grid's marks: the root-cause rank, and the ranks missing from a collective."""


class RankStates:
    """The ranks' states the app shows, and when the rank bar and the grid's marks are redrawn."""

    def __init__(self, context: Context, bar: RankBar, post: Post, set_timer: SetTimer) -> None:
        """States of the context's ranks, drawn in `bar`; crashes are posted with `post`."""
        self._session = context.session
        self._findings = context.findings
        self._bar = bar
        self._post = post
        self._set_timer = set_timer
        self.states: list[RankState] = []
        """Every rank's state as last told; the rank bar shows it once per frame."""
        self._bar_stale = False
        self.flight: Timer | None = None
        """The rank bar's refresh: runs while a command is in flight or states change, rests otherwise."""
        self._marks_stale = True
        self._marks_found = 0
        """How many verdicts the grid's marks were last worked out with."""
        self._crash_notes: list[tuple[int, str]] = []
        """Crashes to say in the command log (the keys were in use elsewhere, or went to another
        rank's crash), said together: 256 ranks hitting the same bug make one line, not 255."""
        self._crash_burst = False
        """A crash took the keys, or crashes wait to be said, less than `CRASH_NOTE_WAIT` ago: the
        focus moves when Textual gets to it, so the focused rank does not say so yet."""

    def reset(self, count: int) -> None:
        """`count` ranks, none told of yet."""
        self.states = [RankState() for _ in range(count)]
        self._bar.states = tuple(self.states)

    def crashed(self, rank: int) -> bool:
        """Whether `rank` had crashed, as last told."""
        return has_crashed(self.states[rank])

    def tell(self, rank: int, state: RankState, keys_free: bool) -> None:
        """A rank's new state: shown in the bar on the next frame; a rank that crashes gets the
        keys when they are `keys_free` (nothing typed into the command line or another crash)."""
        crashed_before = has_crashed(self.states[rank])
        self.states[rank] = state
        self._bar_stale = self._marks_stale = True  # drawn once a frame: a step of N ranks is N events
        if self.flight is not None:
            self.flight.resume()
        if crashed_before or not has_crashed(state):
            return
        self.show_flight()  # the bar knows the crash now: F6 and the focus it takes read it
        # Keys being typed on the command line, or into another post-mortem, must not land in this
        # rank's pdb halfway through a line: say it instead.
        if not self._crash_burst:
            self._crash_burst = True
            self._set_timer(CRASH_NOTE_WAIT, self._say_crashes)
            if keys_free:
                self._post(messages.CrashTakesKeys(rank))
                return
        self._crash_notes.append((rank, state.describe()))

    def _say_crashes(self) -> None:
        """One line for each way ranks crashed since the last such line."""
        notes, self._crash_notes, self._crash_burst = self._crash_notes, [], False
        lines = [
            inert(f"{ranks} {what} · F6 goes to {'its pane' if ranks.startswith('rank ') else 'their panes'}")
            for ranks, what in by_words(notes)
        ]
        if lines:
            self._post(messages.CrashesSaid(tuple(lines)))

    def show_flight(self) -> None:
        """Show which ranks the broadcast in flight still waits for."""
        bar, lockstep = self._bar, self._session.lockstep
        if self._bar_stale:
            self._bar_stale = False
            bar.states = tuple(self.states)
        bar.outstanding = lockstep.outstanding
        bar.in_flight = lockstep.command
        if not bar.in_flight and self.flight is not None:
            self.flight.pause()  # nothing moves until a rank's state does (an idle app costs nothing)

    def grid_marks(self) -> Marks | None:
        """The root cause, and the ranks missing from a collective while others wait in it (None:
        nothing changed since they were last worked out)."""
        found = self._findings.verdicts.found  # only ever appended to
        if not self._marks_stale and len(found) == self._marks_found:
            return None  # an idle app with 256 ranks must not scan them 4 times a second
        self._marks_stale, self._marks_found = False, len(found)
        ranks = self._session.ranks
        failures = [Failure(r.index, r.failed_at, r.state) for r in ranks if r.failed_at is not None]
        waiting = any(rank.state.phase is Phase.WAITING for rank in ranks)
        missing = {r for v in found if v.kind in MISSING_KINDS for r in v.suspects} if waiting else set()
        return (None if one_bug(failures, found) else root_cause(failures, found)), missing

    def mark(self, grid: StateGridView) -> None:
        """Mark the root cause in `grid`, and the ranks missing from a collective while others wait
        in it (the app's timer asks a few times a second; nothing is drawn unless they changed)."""
        marks = self.grid_marks()
        if marks is not None:
            grid.set_marks(*marks)
