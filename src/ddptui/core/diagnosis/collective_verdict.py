"""What collective verdicts are drawn from (`RankStatus`) and what they say (`Verdict`).

Plain values shared by the checks of one group's collectives (`group_verdicts`), of the ranks gloo
aborted (`aborts`) and of waits that cross groups (`chains`); `collectives.diagnose` runs them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ddptui.core.model.fatal import FatalDeath
from ddptui.core.model.state import RankState
from ddptui.rank.protocol import Frame


@dataclass(frozen=True)
class RankStatus:
    """What a rank is doing, in the words the rank bar uses, and where it stands."""

    state: str
    """`waiting at train.py:11 in sleep`, `paused at f.py:3`, `running`, `exited 0`, `crashed ...`."""
    where: Frame | None = None
    death: FatalDeath | None = None
    """How the rank died of a fatal signal, when it did and its terminal says."""

    @classmethod
    def of(cls, state: RankState, death: FatalDeath | None = None) -> RankStatus:
        """The status of a rank as the core tracks it."""
        return cls(state.describe(), state.location, death)

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
    """One finding: `kind` (`hang`, `early exit`, `deadlock`, `skip`, `mismatch`) and its line.

    A verdict that explains others carries them as `consequences`, said after it in one chain:
    `hang: rank 3 skipped ... → ranks 0-1 wait in WORLD #1 barrier (...) for rank 2`.
    """

    kind: str
    text: str
    pg: str
    seq: int
    suspects: frozenset[int]
    """The ranks at fault: missing from the collective, or passing what the others did not."""
    victims: frozenset[int] = frozenset()
    """Ranks whose own failure this verdict explains (a peer gloo aborted)."""
    waiting: frozenset[int] = frozenset()
    """Ranks waiting in the collective for the suspects: their hang is the suspects' doing."""
    about: str = ""
    """The collective, `group [2,3] #2 all_reduce [2] float32 (train.py:11)`."""
    link: str = ""
    """How it reads as another's consequence: `rank 0 waits in WORLD #2 barrier (...) for ranks 2-3`."""
    consequences: tuple[Verdict, ...] = ()

    def __str__(self) -> str:
        """`hang: rank 1 is missing from collective #3 ...`, then ` → ` and each consequence."""
        chain = "".join(f" → {verdict.link}" for verdict in self.consequences)
        return f"{self.kind}: {self.text}{chain}"

    def follow_up(self, consequence: Verdict) -> Verdict:
        """A consequence found after this verdict was said, as a verdict of its own: `hang: rank 0
        waits in WORLD #2 barrier (...) for ranks 2-3, a consequence of the mismatch in ...`."""
        text = f"{consequence.link}, a consequence of the {self.kind} in {self.about}"
        return dataclasses.replace(consequence, text=text, consequences=())

    def chain(self) -> tuple[Verdict, ...]:
        """This verdict, then its consequences."""
        return (self, *self.consequences)
