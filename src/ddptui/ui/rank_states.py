"""`RankStates`: every rank's state as last told, shown in the rank bar, on panes and in the grid.

A step of N ranks is N state events: the rank bar and the state grid's marks are redrawn at most
once a frame from what was told, not once an event. A rank that crashes gets the keys (or a line
saying so, when they are in use elsewhere).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.timer import Timer

from ddptui.core.commands import registry as commands
from ddptui.core.diagnosis.rootcause import Failure, one_bug, root_cause
from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.targets import by_words
from ddptui.core.model.text import inert
from ddptui.ui.pane_pages import dress_pane
from ddptui.ui.rank_bar import has_crashed

if TYPE_CHECKING:
    from ddptui.ui.app import DdptuiApp

CRASH_NOTE_WAIT = 0.1
"""Seconds a crash waits for others to be said with it (ranks that hit one bug crash together)."""
MISSING_KINDS = ("hang", "early exit")
"""Collective verdicts whose suspects are ranks the others wait for."""


class RankStates:
    """The ranks' states the app shows, and when the rank bar and the grid's marks are redrawn."""

    def __init__(self, app: DdptuiApp) -> None:
        self._app = app
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
        focus moves when Textual gets to it, so `focused_rank` does not say so yet."""

    def reset(self, count: int) -> None:
        """`count` ranks, none told of yet."""
        self.states = [RankState() for _ in range(count)]
        self._app.rank_bar.states = tuple(self.states)

    def rank_state(self, rank: int, state: RankState) -> None:
        """Show a rank's new state in the bar and on its pane; a rank that crashes gets the keys."""
        app = self._app
        states = self.states
        # Two states, not `bar.crashed` (a scan of every rank): 256 ranks stepping make 256 calls.
        crashed_before, focus_crashed = has_crashed(states[rank]), has_crashed(states[app.focused_rank])
        states[rank] = state
        self._bar_stale = self._marks_stale = True  # drawn once a frame: a step of N ranks is N events
        if self.flight is not None:
            self.flight.resume()
        if app.state_grid is not None:
            app.state_grid.set_state(rank, state)
        dress_pane(app.session, app.pane(rank), state)
        if crashed_before or not has_crashed(state) or app._quitting:
            return
        self.show_flight()  # the bar knows the crash now: F6 and the focus below read it
        # Keys being typed on the command line, or into another post-mortem, must not land in this
        # rank's pdb halfway through a line: say it instead.
        if not self._crash_burst:
            self._crash_burst = True
            app.set_timer(CRASH_NOTE_WAIT, self._say_crashes)
            if not (app.broadcasting or focus_crashed):
                app.action_focus_rank(0, crashed=True)
                return
        self._crash_notes.append((rank, state.describe()))

    def _say_crashes(self) -> None:
        """One line for each way ranks crashed since the last such line."""
        notes, self._crash_notes, self._crash_burst = self._crash_notes, [], False
        lines = [
            inert(f"{ranks} {what} · F6 goes to {'its pane' if ranks.startswith('rank ') else 'their panes'}")
            for ranks, what in by_words(notes)
        ]
        if lines and not self._app._quitting:
            self._app.command_log.show(commands.Result(tuple(lines), error=True))

    def show_flight(self) -> None:
        """Show which ranks the broadcast in flight still waits for."""
        bar, session = self._app.rank_bar, self._app.session
        if self._bar_stale:
            self._bar_stale = False
            bar.states = tuple(self.states)
        bar.outstanding = session.lockstep.outstanding
        bar.in_flight = session.lockstep.command
        if not bar.in_flight and self.flight is not None:
            self.flight.pause()  # nothing moves until a rank's state does (an idle app costs nothing)

    def mark_grid(self) -> None:
        """Mark the root cause, and the ranks missing from a collective while others wait in it."""
        app = self._app
        assert app.state_grid is not None
        found = app.context.findings.verdicts.found  # only ever appended to
        if not self._marks_stale and len(found) == self._marks_found:
            return  # nothing changed (an idle app with 256 ranks must not scan them 4 times a second)
        self._marks_stale, self._marks_found = False, len(found)
        ranks = app.session.ranks
        failures = [Failure(r.index, r.failed_at, r.state) for r in ranks if r.failed_at is not None]
        waiting = any(rank.state.phase is Phase.WAITING for rank in ranks)
        missing = {r for v in found if v.kind in MISSING_KINDS for r in v.suspects} if waiting else set()
        root = None if one_bug(failures) else root_cause(failures, found)
        app.state_grid.set_marks(root, missing)
