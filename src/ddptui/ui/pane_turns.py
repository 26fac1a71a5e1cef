"""`PaneTurns`: when rank panes may redraw a flood whole or re-emulate one, shared by every pane.

A flood repaint redraws a whole pane and a backfill step emulates a skipped flood again: each
takes milliseconds of the app's loop. So the panes take turns at them, and both wait while keys
come in, for the key's echo to be drawn first.
"""

from __future__ import annotations

from time import monotonic


class PaneTurns:
    """The panes' shared turns at flood repaints and backfill steps (one per app process)."""

    FLOOD_REPAINT = 0.1
    """Seconds between repaints while a backlog is being emulated: a log flood in 8 panes must
    not repaint 8 full panes 30 times a second (that alone takes more than a core)."""

    FLOOD_SLOT = 0.02
    """Seconds between two flood repaints of any panes: each redraws a whole pane (every line
    scrolled), and several in one screen update stall the app (each costs milliseconds of CPU: see
    `KEY_QUIET`), so they take turns, about one per screen update."""

    KEY_QUIET = 0.1
    """Seconds after a key during a flood in which no pane redraws whole (a flood repaint, or a
    scroll of a pane that keeps up): the key's screen update then redraws what the key changed,
    not also whole panes (3-4 ms of CPU each on a loaded 2-core machine, several per update)."""

    KEY_QUIET_MAX = 0.5
    """Longest keys hold back the panes' flood repaints: they still move while someone types."""

    BACKFILL_QUIET = 0.5
    """Seconds without output before a backfill starts (or goes on): never while the rank floods."""

    BACKFILL_SLOT = 0.012
    """Seconds between two backfill steps of any panes: they take turns, so re-emulating eight
    floods (half a second of CPU each on a slow core) keeps a third of the loop at most, instead
    of every pane's frame taking its budget back to back (a key would wait for all of them)."""

    def __init__(self) -> None:
        self.next_flood = 0.0
        """When the next flood repaint may happen, for every pane."""
        self.last_flood_repaint = 0.0
        """When a pane last took a flood repaint."""
        self.next_backfill = 0.0
        """When the next backfill step may happen, for every pane."""
        self.last_key = 0.0
        """When a key last came in (no backfill step within `KEY_QUIET` of it)."""

    def key_pressed(self) -> None:
        """A key came in: hold the panes' flood repaints back for `KEY_QUIET` (see `KEY_QUIET_MAX`)."""
        now = monotonic()
        self.last_key = now
        if now - self.last_flood_repaint < self.KEY_QUIET_MAX:
            self.next_flood = max(self.next_flood, now + self.KEY_QUIET)

    def flood_due(self, now: float, painted: float, fed_at: float) -> bool:
        """True when a pane that last painted at `painted`, whose rank last printed at `fed_at`,
        may repaint its flood now: its interval is over and no other pane's turn or key holds the
        repaints back; or keys hold them, but its rank has been quiet for `FLOOD_REPAINT` and no
        pane repainted in the last `FLOOD_SLOT`. The flood is over: its last screen is shown once,
        not a pane every `KEY_QUIET_MAX` (while keys come, eight panes would take eight of those)."""
        if now - painted < self.FLOOD_REPAINT:
            return False
        if now >= self.next_flood:
            return True
        return now - fed_at >= self.FLOOD_REPAINT and now - self.last_flood_repaint >= self.FLOOD_SLOT

    def take_flood_turn(self, now: float) -> None:
        """A pane repaints its flood now: the next may in `FLOOD_SLOT` seconds (or once keys let it:
        a flood that ended repaints while they hold the others)."""
        self.next_flood = max(self.next_flood, now + self.FLOOD_SLOT)
        self.last_flood_repaint = now

    def holding(self, now: float) -> bool:
        """True while flood repaints wait (for a key, or for another pane's turn)."""
        return now < self.next_flood

    def backfill_turn(self, now: float, fed_at: float) -> bool:
        """True when a pane whose rank last printed at `fed_at` may take a backfill step now: the
        rank has been quiet a while, no key came in just now, and it is this pane's turn."""
        if now - fed_at <= self.BACKFILL_QUIET or now - self.last_key < self.KEY_QUIET:
            return False
        if now < self.next_backfill:
            return False
        self.next_backfill = now + self.BACKFILL_SLOT
        return True


TURNS = PaneTurns()
"""The turns of every pane of the app."""
