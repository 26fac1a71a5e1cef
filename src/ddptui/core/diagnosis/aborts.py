"""Mismatches gloo ended by aborting a rank (`Received data size doesn't match expected size`).

A size mismatch inside a gloo collective aborts the peer that received more than it expected
(SIGABRT, from one of gloo's C++ threads); the others fail with `Connection reset by peer`. The
aborted rank sends no last log, and may never have been asked for one: where its main thread
stood (its fatal dump) and its peers' records at that call site say which collective it was, and
the same call site in the other groups (a sibling tp group) says which shape is the odd one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from ddptui.core.diagnosis.collective_records import Record
from ddptui.core.diagnosis.collective_verdict import RankStatus, Verdict
from ddptui.core.diagnosis.group_verdicts import last_collective
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.topology import Topology
from ddptui.rank.protocol import Frame

GLOO_MISMATCH = re.compile(
    r"[^.\]]*(?:Received data size doesn't match expected size|collective mismatch)[^.?]*"
)
"""The sentence of gloo's `what()` that says the ranks passed different sizes."""


def abort_verdicts(
    logs: Mapping[int, Sequence[Record]],
    statuses: Mapping[int, RankStatus],
    names: Mapping[str, str],
    topology: Topology,
) -> list[Verdict]:
    """A mismatch per rank gloo aborted for a size mismatch, placed in its collective when known."""
    verdicts = []
    for rank in sorted(statuses):
        death = statuses[rank].death
        said = GLOO_MISMATCH.search(death.what) if death is not None else None
        if death is None or said is None or death.where is None:
            continue
        found = collective_of(rank, death.where, logs, topology)
        if found is not None:
            verdicts.append(_verdict(rank, found, said.group().strip(), logs, names))
    return verdicts


def _at(record: Record, where: Frame) -> bool:
    """True when the record was issued from the user's line `where`."""
    return record.site is not None and (record.site.file, record.site.line) == (where.file, where.line)


def collective_of(
    rank: int, where: Frame, logs: Mapping[int, Sequence[Record]], topology: Topology
) -> tuple[str, int] | None:
    """`(pg, seq)` of the collective a dead rank was in at `where`: its own last one when its log
    is known, else its peers' at that line, in a group it is a member of.

    Without the job's topology, membership is unknown: the group whose ranks still stand in that
    collective (did not go on past it) is taken, then the one with the fewest ranks known in it
    (the dead rank is among the others).
    """
    own = [record for record in logs.get(rank, ()) if not record.p2p]
    if own and _at(own[-1], where):
        return own[-1].pg, own[-1].seq
    seen: dict[tuple[str, int], set[int]] = {}
    for peer, log in logs.items():
        for record in log:
            if peer != rank and not record.p2p and _at(record, where):
                seen.setdefault((record.pg, record.seq), set()).add(peer)
    latest: dict[str, int] = {}
    for pg, seq in seen:
        latest[pg] = max(latest.get(pg, 0), seq)
    candidates = [(pg, seq) for pg, seq in latest.items() if _member(rank, pg, topology) is not False]

    def rank_of(at: tuple[str, int]) -> tuple[bool, int]:
        """Groups whose ranks still stand in it first, then those with fewer ranks known in it."""
        standing = any(last_collective(logs[peer]) == at for peer in seen[at])
        return not standing, len(seen[at])

    return min(candidates, key=rank_of, default=None)


def _member(rank: int, pg: str, topology: Topology) -> bool | None:
    """Whether `rank` is a member of group `pg`; None when the topology does not say."""
    group = topology.groups.get(pg)
    return None if group is None else rank in group.ranks


def _verdict(
    rank: int,
    at: tuple[str, int],
    sentence: str,
    logs: Mapping[int, Sequence[Record]],
    names: Mapping[str, str],
) -> Verdict:
    """`tp group [2,3] (dp=1) #2 all_reduce at train.py:13: rank 3 passed [5] float32; gloo aborted
    rank 2 there (Received data size doesn't match expected size)`."""
    pg, seq = at
    records = {r: rec for r, log in logs.items() for rec in log if (rec.pg, rec.seq) == at and not rec.p2p}
    first = records[min(records)]
    name = names.get(pg) or ""
    about = f"{name} #{seq}" if name else f"collective #{seq}"
    about += f" {first.op} at {first.site}" if first.site else f" {first.op}"
    odd = _odd(records, rank, _usual(first, logs))
    peers = sorted(r for r in records if r != rank and r not in odd)
    if odd:
        said = ", ".join(f"{name_ranks(ranks)} passed {what}" for what, ranks in _by_what(records, odd))
        own = records.get(rank)
        said += f", rank {rank} {_what(own)}" if own is not None else ""
        suspects, victims = frozenset(odd), frozenset({rank})
    else:
        said = "; ".join(f"{name_ranks(ranks)} passed {what}" for what, ranks in _by_what(records, peers))
        own = records.get(rank)
        said += f", rank {rank} {_what(own)}" if own is not None else f" and rank {rank} something else"
        suspects, victims = frozenset({rank}), frozenset()
    text = f"{about}: {said}; gloo aborted rank {rank} there ({sentence})"
    return Verdict("mismatch", text, pg, seq, suspects, victims=victims, about=about)


def _usual(record: Record, logs: Mapping[int, Sequence[Record]]) -> tuple[object, ...] | None:
    """What most ranks passed to the op at that line and sequence number, in any group; None on a tie.

    Sibling groups (every tp group of a mesh) run the same line: their ranks outvote a pair.
    """
    counts = Counter(
        rec.signature()
        for log in logs.values()
        for rec in log
        if rec.seq == record.seq and rec.op == record.op and not rec.p2p and rec.site == record.site
    )
    ranked = counts.most_common(2)
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _odd(records: Mapping[int, Record], aborted: int, usual: tuple[object, ...] | None) -> list[int]:
    """The ranks of the collective that passed something else than the usual; without a usual,
    the aborted rank's peers (gloo aborts the rank that received more than it expected)."""
    if usual is None:
        return sorted(r for r in records if r != aborted)
    return sorted(r for r, record in records.items() if r != aborted and record.signature() != usual)


def _by_what(records: Mapping[int, Record], ranks: list[int]) -> list[tuple[str, list[int]]]:
    """`[("[5] float32", [3])]`: the ranks grouped by what they passed."""
    groups: dict[str, list[int]] = {}
    for rank in ranks:
        groups.setdefault(_what(records[rank]), []).append(rank)
    return list(groups.items())


def _what(record: Record) -> str:
    """`[5] float32`: what the record passed, without the op."""
    return record.what().partition(" ")[2] or "no tensors"
