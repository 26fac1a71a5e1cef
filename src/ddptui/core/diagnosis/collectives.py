"""Verdicts from every rank's collectives: hangs, deadlocks, mismatches, skips and early exits.

Pure logic on the records `ddptui.rank.collectives.collective_log` sends (no I/O, no torch). Each
process group is checked on its own (`group_verdicts`); groups are named in the user's words by
the job's `Topology` (`tp group [2,3] (dp=1)`, `WORLD`; `group 7` while it is not known).

The records themselves (`Record`, `parse_log`) are `collective_records`'; the `:collectives` table
is `collectives_table`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddptui.core.diagnosis.aborts import abort_verdicts
from ddptui.core.diagnosis.chains import chain
from ddptui.core.diagnosis.collective_records import WORLD, Record, process_groups
from ddptui.core.diagnosis.collective_verdict import UNKNOWN, RankStatus, Verdict
from ddptui.core.diagnosis.group_verdicts import GroupCheck
from ddptui.core.diagnosis.p2p import p2p_verdicts
from ddptui.core.model.topology import Topology

__all__ = ["UNKNOWN", "RankStatus", "Verdict", "diagnose", "group_names", "verdict_lines"]


def verdict_lines(
    logs: Mapping[int, Sequence[Record]],
    statuses: Mapping[int, RankStatus] | None = None,
    topology: Topology | None = None,
) -> list[str]:
    """`diagnose`, one line per verdict (its consequences in it)."""
    return [str(verdict) for verdict in diagnose(logs, statuses, topology)]


def group_names(pgs: Sequence[str], topology: Topology) -> dict[str, str]:
    """Each group in the user's words; empty for the default group of a job that has no other."""
    if list(pgs) == [WORLD]:
        return {WORLD: ""}
    return {pg: topology.group_name(pg) for pg in pgs}


def diagnose(
    logs: Mapping[int, Sequence[Record]],
    statuses: Mapping[int, RankStatus] | None = None,
    topology: Topology | None = None,
) -> list[Verdict]:
    """Every verdict the ranks' collectives and states support; empty when all is consistent.

    `logs` holds the ranks whose records are known; `statuses` may name more (a rank that exited
    before it could be asked). Without a status, a rank whose last collective has not returned
    counts as waiting in it. A hang caused by a verdict in another group is not said on its own:
    it is among that verdict's `consequences` (`chains`).
    """
    statuses = statuses or {}
    topology = topology or Topology()
    pgs = process_groups(logs)
    names = group_names(pgs, topology)
    verdicts = abort_verdicts(logs, statuses, names, topology)
    aborted = {(verdict.pg, verdict.seq): verdict.victims | verdict.suspects for verdict in verdicts}
    for pg in pgs:
        known = topology.groups.get(pg)
        group = GroupCheck(pg, names[pg], logs, statuses, known.ranks if known else None)
        verdicts += _group_verdicts(group, aborted)
    return chain(verdicts, logs, statuses) + p2p_verdicts(logs, statuses)


def _group_verdicts(group: GroupCheck, aborted: Mapping[tuple[str, int], frozenset[int]]) -> list[Verdict]:
    """One group's hangs, deadlocks, skips and mismatches, less what the aborts in it already say."""
    skips = group.divergence()
    # a rank gloo aborted in a collective is not missing from it: its log died with it
    hangs = [v for v in group.hangs() if not v.suspects <= aborted.get((v.pg, v.seq), frozenset())]
    explained = {rank for verdict in skips for rank in verdict.suspects}
    for verdict in hangs:
        if verdict.kind in ("hang", "early exit"):
            skips += group.hang_skips(verdict, explained)
    deadlocks = group.deadlocks()
    locked = {verdict.seq for verdict in deadlocks}
    # Ranks waiting in different ops differ there too: the deadlock already says so; and while
    # every rank is still inside such ops, it is a deadlock in the making, not yet a mismatch. A
    # mismatch gloo aborted a rank for is said by the abort, which knows more.
    skips = [
        v
        for v in skips
        if not (
            v.kind == "mismatch"
            and (v.seq in locked or group.ops_in_flight(v.seq) or (v.pg, v.seq) in aborted)
        )
    ]
    return hangs + deadlocks + skips
