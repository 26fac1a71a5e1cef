"""Which failure came first and which followed from it: the root cause of a job's death.

Failures are ordered by ddptui's own clock (when each rank's exception or non-zero exit reached
the core, to the millisecond), not by whole-second timestamps. A failure whose message is what a
rank says when a *peer* went away (gloo's `Connection closed by peer`, a store or collective
timeout, a launcher's SIGTERM) is a consequence; the root cause is the earliest failure that is
not one — or, when every failure is a consequence, a rank that exited 0 early while its peers
waited in a collective it never entered (an `early exit` verdict names it).
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


def root_cause(failures: Sequence[Failure], verdicts: Iterable[Verdict] = ()) -> int | None:
    """The rank whose failure explains the others, or None when nothing failed."""
    ordered = sorted(failures, key=lambda failure: (failure.when, failure.rank))
    for failure in ordered:
        if not failure.consequence:
            return failure.rank
    for verdict in verdicts:
        if verdict.kind == "early exit" and verdict.suspects:
            return min(verdict.suspects)
    return ordered[0].rank if ordered else None


def one_bug(failures: Sequence[Failure]) -> bool:
    """True when several ranks failed the same way on their own: no rank caused the others'."""
    causes = {str(f.state.crash).rsplit(" (", 1)[0] for f in failures if not f.consequence}
    return len(causes) == 1 and sum(not f.consequence for f in failures) > 1


def tags(failures: Sequence[Failure], verdicts: Iterable[Verdict] = ()) -> dict[int, str]:
    """`← root cause` for the root cause, `(consequence of rank R)` for the failures it explains.

    Nothing is tagged when only one rank failed and nothing else is implicated: the crash line
    says it all.
    """
    verdicts = list(verdicts)
    if one_bug(failures):
        return {}
    root = root_cause(failures, verdicts)
    if root is None or (len(failures) == 1 and failures[0].rank == root):
        return {}
    marks = {root: ROOT}
    for failure in failures:
        if failure.rank != root and failure.consequence:
            marks[failure.rank] = f"(consequence of rank {root})"
    return marks
