"""Which failure came first and which followed from it: the root cause of a job's death.

Failures are ordered by ddptui's own clock (when each rank's exception or non-zero exit reached
the core, to the millisecond), not by whole-second timestamps. A failure whose message is what a
rank says when a *peer* went away (gloo's `Connection closed by peer`, a store or collective
timeout, a launcher's SIGTERM) is a consequence, and so is the failure of a rank a verdict says
another caused (the peer gloo aborted for a mismatch); the root cause is the earliest failure that
is not one — or, when every failure is a consequence, the rank a verdict names: one that exited 0
early while its peers waited in a collective it never entered (`early exit`), or one whose shape
made gloo abort a peer (a `mismatch` with victims). A rank still waiting at the end in a
collective the root cause never reached (a `hang` or `early exit` verdict's `waiting`) is its
consequence too, though it never failed.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ddptui.core.diagnosis.collectives import Verdict
from ddptui.core.model.state import NO_STATUS, RankState

ROOT = "← root cause"
"""The mark of the root cause in a summary."""
CONSEQUENCES = re.compile(
    "|".join(
        (
            r"Connection closed by peer",
            r"Connection reset by peer",
            r"Broken pipe",
            r"Timed out waiting",
            r"[Tt]imeout after \d+",
            r"wait timeout after",
            r"failed to pass monitoredBarrier",
            r"received errors while waiting for send/recv",
            r"remote worker crash",
            r"DistNetworkError",
            r"Socket Timeout",
        )
    )
)
"""What a rank's error says when the failure began on another rank."""


@dataclass(frozen=True)
class Failure:
    """One rank's failure as the core saw it."""

    rank: int
    when: float
    """When the core learnt of it (monotonic seconds)."""
    state: RankState

    @property
    def consequence(self) -> bool:
        """True when the failure reads like the echo of another rank's."""
        crash = self.state.crash
        if crash is not None:
            return bool(CONSEQUENCES.search(f"{crash.type}: {crash.message}"))
        return self.state.exit_code in (-signal.SIGTERM, NO_STATUS)  # a launcher ends the others


def victims(verdicts: Iterable[Verdict]) -> frozenset[int]:
    """Ranks whose failure a verdict says another rank caused."""
    return frozenset(rank for verdict in verdicts for rank in verdict.victims)


def root_cause(failures: Sequence[Failure], verdicts: Iterable[Verdict] = ()) -> int | None:
    """The rank whose failure explains the others, or None when nothing failed."""
    verdicts = list(verdicts)
    caused = victims(verdicts)
    ordered = sorted(failures, key=lambda failure: (failure.when, failure.rank))
    for failure in ordered:
        if not failure.consequence and failure.rank not in caused:
            return failure.rank
    for verdict in verdicts:
        if verdict.suspects and (verdict.kind == "early exit" or verdict.victims):
            return min(verdict.suspects)
    return ordered[0].rank if ordered else None


def one_bug(failures: Sequence[Failure], verdicts: Iterable[Verdict] = ()) -> bool:
    """True when several ranks failed the same way on their own: no rank caused the others'."""
    caused = victims(verdicts)
    own = [f for f in failures if not f.consequence and f.rank not in caused]
    causes = {str(f.state.crash).rsplit(" (", 1)[0] for f in own}
    return len(causes) == 1 and len(own) > 1


def waiting_for(verdicts: Iterable[Verdict], root: int) -> frozenset[int]:
    """Ranks a verdict found waiting in a collective `root` never reached."""
    return frozenset(rank for v in verdicts if root in v.suspects for rank in v.waiting)


def tags(
    failures: Sequence[Failure], verdicts: Iterable[Verdict] = (), waiting: Iterable[int] = ()
) -> dict[int, str]:
    """`← root cause` for the root cause, `(consequence of rank R)` for the failures it explains.

    `waiting`: ranks still waiting at the end; one a verdict found waiting for the root cause is
    its consequence too. Nothing is tagged when only one rank failed and nothing else is
    implicated: the crash line says it all.
    """
    verdicts = list(verdicts)
    if one_bug(failures, verdicts):
        return {}
    root = root_cause(failures, verdicts)
    if root is None:
        return {}
    stuck = waiting_for(verdicts, root) & set(waiting)
    if len(failures) == 1 and failures[0].rank == root and not stuck:
        return {}
    marks = {root: ROOT}
    caused = victims(verdicts)
    for failure in failures:
        if failure.rank != root and (failure.consequence or failure.rank in caused):
            marks[failure.rank] = f"(consequence of rank {root})"
    for rank in stuck - {root}:
        marks.setdefault(rank, f"(consequence of rank {root})")
    return marks
