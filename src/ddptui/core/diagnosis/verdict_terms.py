"""The terms verdicts are written in: what a rank is doing (`RankStatus`), and the `Verdict` itself.

Shared by the collective verdicts (`collectives`) and the point-to-point ones (`p2p`), which
`collectives.diagnose` gathers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddptui.core.model.state import RankState
from ddptui.rank.protocol import Frame


@dataclass(frozen=True)
class RankStatus:
    """What a rank is doing, in the words the rank bar uses, and where it stands."""

    state: str
    """`waiting at train.py:11 in sleep`, `paused at f.py:3`, `running`, `exited 0`, `crashed ...`."""
    where: Frame | None = None

    @classmethod
    def of(cls, state: RankState) -> RankStatus:
        """The status of a rank as the core tracks it."""
        return cls(state.describe(), state.location)

    @property
    def phase(self) -> str:
        """The first word: `waiting`, `paused`, `running`, `exited`, `killed`, `crashed`, ..."""
        return self.state.split(" ", 1)[0]

    @property
    def gone(self) -> bool:
        """True once the process has ended (exited, or killed by a signal)."""
        return self.phase in ("exited", "killed")

    def now(self) -> str:
        """The present part of a sentence about the rank: `is at train.py:11 in sleep`."""
        phase, _, rest = self.state.partition(" ")
        if phase == "waiting":
            return f"is {rest}" if rest else f"is at {self.where}" if self.where else "is waiting"
        if phase in ("paused", "running", "starting"):
            return f"is {self.state}"
        return self.state


UNKNOWN = RankStatus("")
"""The status of a rank nobody described: its records alone speak for it."""


@dataclass(frozen=True)
class Verdict:
    """One finding: `kind` (`hang`, `early exit`, `deadlock`, `skip`, `mismatch`) and its line."""

    kind: str
    text: str
    pg: str
    seq: int
    suspects: frozenset[int]

    def __str__(self) -> str:
        """`hang: rank 1 is missing from collective #3 ...`."""
        return f"{self.kind}: {self.text}"
