"""`Context`: what the `:` commands act on, and the state that is theirs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from ddptui.core.diagnosis.compare import Comparison
from ddptui.core.diagnosis.findings import Findings
from ddptui.core.session.lockstep import Broadcast
from ddptui.core.session.session import Session

MAX_STOPS = 1000
"""Lockstep continues an `:until` makes at most, unless `--max-stops` says otherwise."""


@dataclass
class Context:
    """The session, what was found in it, and the commands' own state: the watched expressions
    and the last `:compare` table. One per session, made by its front end."""

    session: Session
    findings: Findings
    watches: list[str] = field(default_factory=list)
    """Expressions compared across ranks after every step (`:watch`)."""
    halted_watches: dict[str, str] = field(default_factory=dict)
    """Watches evaluated no more after steps, each with why: it ran past its time on a rank."""
    last_compare: Comparison | None = None
    """The last `:compare` table (rank groups can be made from its rows)."""
    max_stops: int = MAX_STOPS
    """Lockstep continues an `:until` makes at most (`--max-stops`; `:until --max-stops N` for one)."""
    on_progress: list[Callable[[str], None]] = field(default_factory=list)
    """Told how a long command gets on (`:until EXPR … stop 17…`), and "" once it ends."""
    on_stop: list[Callable[[Broadcast], None]] = field(default_factory=list)
    """Told of each lockstep `c` an `:until` makes, once its ranks are back (`--batch` prints
    their answers as it does a typed `c`'s)."""
    hunting: asyncio.Task[object] | None = None
    """The task running an `:until` (one at a time), which `interrupt` cancels."""
    stopped_by_user: bool = False
    """`interrupt` cancelled the `:until` that runs: it stops once its ranks are back."""
    leave: Callable[[], bool] | None = None
    """In a detached session: detaches the terminal that typed last (`:detach`, Ctrl+D)."""

    @classmethod
    def of(cls, session: Session) -> Context:
        """A new context for a session, with its findings listening to it."""
        return cls(session, Findings(session))

    def progress(self, text: str) -> None:
        """Tell the front ends how a long command gets on ("" once it ends)."""
        for show in self.on_progress:
            show(text)

    def interrupt(self) -> bool:
        """Stop the `:until` that runs (the user's Ctrl-C, F12 or Escape): True when one ran and
        was not stopped already. Its stop in flight comes back first, so every rank it continued
        is at its prompt again when it says it stopped."""
        task = self.hunting
        if task is None or task.done() or self.stopped_by_user:
            return False
        self.stopped_by_user = True
        task.cancel()
        return True
