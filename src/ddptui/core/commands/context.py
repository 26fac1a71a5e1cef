"""`Context`: what the `:` commands act on, and the state that is theirs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ddptui.core.diagnosis.compare import Comparison
from ddptui.core.diagnosis.findings import Findings
from ddptui.core.session.session import Session


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

    @classmethod
    def of(cls, session: Session) -> Context:
        """A new context for a session, with its findings listening to it."""
        return cls(session, Findings(session))
