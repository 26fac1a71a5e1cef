"""Waits that cross groups: the verdict at the root, and the waits it causes elsewhere as its consequences.

A rank missing from one group's collective may stand in another group's: rank 2 misses WORLD's
barrier because it waits in its pair's all_reduce, which rank 3 skipped. A hang whose missing
ranks all stand in a collective another verdict is about is a consequence of that verdict, said
after it in one chain, root first. Two hangs that wait on each other are told apart by call
sites: a rank that reached a collective without the call its peers made on their way there
skipped that call, and is the root; without such a story they are one deadlock across groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ddptui.core.diagnosis.collective_records import Record
from ddptui.core.diagnosis.collective_verdict import UNKNOWN, RankStatus, Verdict
from ddptui.core.model.targets import name_ranks

At = tuple[str, int]
"""A collective: its group's name and its sequence number there."""
HANGS = ("hang", "early exit")
"""Verdicts about ranks missing from a collective: the ones that can be another's consequence."""


def chain(
    verdicts: list[Verdict], logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus]
) -> list[Verdict]:
    """The verdicts with each consequence moved into the chain of its root, roots in their order."""
    stands = standing(verdicts, logs, statuses)
    about: dict[At, Verdict] = {}
    for verdict in verdicts:
        about.setdefault((verdict.pg, verdict.seq), verdict)
    causes: dict[int, int] = {}
    found = list(verdicts)
    for index, verdict in enumerate(verdicts):
        there = _elsewhere(verdict, stands)
        if there is None:
            continue
        skip = _skip_root(verdict, there, logs, stands, statuses)
        if skip is not None:
            found[index] = skip
        elif (cause := about.get(there[0])) is not None and cause is not verdict:
            causes[index] = verdicts.index(cause)
    return _gather(found, causes)


def standing(
    verdicts: Sequence[Verdict], logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus]
) -> dict[int, At]:
    """The collective each rank stands in: the one gloo aborted it in, the last one it crashed
    in, or the one it has not returned from (unless it was seen paused since)."""
    stands = {rank: (v.pg, v.seq) for v in verdicts for rank in v.victims}
    for rank, log in logs.items():
        phase = statuses.get(rank, UNKNOWN).phase
        final = next((record for record in reversed(log) if not record.p2p), None)
        if rank in stands or final is None:
            continue
        if phase == "crashed" or (phase in ("waiting", "running", "") and final.pending):
            stands[rank] = (final.pg, final.seq)
    return stands


def _elsewhere(verdict: Verdict, stands: Mapping[int, At]) -> list[At] | None:
    """Where each missing rank of a hang stands, when every one stands in another collective."""
    if verdict.kind not in HANGS or not verdict.suspects:
        return None
    places = [stands.get(rank) for rank in sorted(verdict.suspects)]
    if any(place is None or place == (verdict.pg, verdict.seq) for place in places):
        return None
    return [place for place in places if place is not None]


def _skip_root(
    verdict: Verdict,
    there: list[At],
    logs: Mapping[int, Sequence[Record]],
    stands: Mapping[int, At],
    statuses: Mapping[int, RankStatus],
) -> Verdict | None:
    """The hang retold as a skip (`rank 3 skipped group [2,3] #2 all_reduce ... → rank 2 waits
    there`) when every missing rank went on without the call; None when not."""
    missed = _record(logs, (verdict.pg, verdict.seq))
    missing = sorted(verdict.suspects)
    if missed is None or not all(skipped(r, missed, at, logs) for r, at in zip(missing, there, strict=True)):
        return None
    inside = sorted(rank for rank, at in stands.items() if at == (verdict.pg, verdict.seq))
    crashed = [rank for rank in inside if statuses.get(rank, UNKNOWN).phase == "crashed"]
    waiting = [rank for rank in inside if rank not in crashed]
    text = f"{name_ranks(missing)} skipped {verdict.about}"
    if waiting:
        text += f" → {name_ranks(waiting)} {'waits' if len(waiting) == 1 else 'wait'} there"
    if crashed:
        text += f" → {name_ranks(crashed)} crashed there"
    return dataclasses.replace(verdict, kind="hang", text=text)


def _record(logs: Mapping[int, Sequence[Record]], at: At) -> Record | None:
    """A record of the collective `at`, from any rank that issued it."""
    for log in logs.values():
        for record in log:
            if (record.pg, record.seq) == at and not record.p2p:
                return record
    return None


def skipped(rank: int, missed: Record, there: At, logs: Mapping[int, Sequence[Record]]) -> bool:
    """True when every other rank that issued `there` made `missed`'s call (op and line) more often
    on its way there (since its previous collective in that group) than `rank` did."""
    if missed.site is None:
        return False
    mine = _on_the_way(logs.get(rank, ()), there)
    others = [
        way for peer, log in logs.items() if peer != rank and (way := _on_the_way(log, there)) is not None
    ]
    if mine is None or not others:
        return False

    def calls(way: Sequence[Record]) -> int:
        """How often `missed`'s call was made on that way."""
        return sum(1 for record in way if record.op == missed.op and record.site == missed.site)

    return all(calls(way) > calls(mine) for way in others)


def _on_the_way(log: Sequence[Record], there: At) -> list[Record] | None:
    """The log's collectives between its previous one in `there`'s group and `there` (from the
    start for a group's first); None when the log lacks either."""
    pg, seq = there
    index = next((i for i, r in enumerate(log) if (r.pg, r.seq) == there and not r.p2p), None)
    if index is None:
        return None
    previous = (i for i in range(index - 1, -1, -1) if (log[i].pg, log[i].seq) == (pg, seq - 1))
    start = next(previous, None)
    if start is None and seq > 1:
        return None  # the ring no longer holds it
    return [r for r in log[(start if start is not None else -1) + 1 : index] if not r.p2p]


def _gather(verdicts: list[Verdict], causes: Mapping[int, int]) -> list[Verdict]:
    """Roots in their order, each with its consequences (nearest first); a ring of hangs waiting
    on each other becomes one deadlock."""
    roots: dict[int, list[int]] = {}
    for index in range(len(verdicts)):
        seen = [index]
        while seen[-1] in causes and causes[seen[-1]] not in seen:
            seen.append(causes[seen[-1]])
        root = seen[-1]
        if root in causes:  # a ring: its first verdict stands for it
            root = min(seen[seen.index(causes[root]) :])
        roots.setdefault(root, [])
        if index != root:
            roots[root].append(index)
    found = []
    for root, rest in sorted(roots.items()):
        verdict = verdicts[root]
        if root in causes:
            verdict = _deadlock(verdict, [verdicts[i] for i in rest])
        consequences = tuple(verdicts[i] for i in sorted(rest, key=lambda i: _depth(i, causes, root)))
        found.append(dataclasses.replace(verdict, consequences=consequences))
    return found


def _depth(index: int, causes: Mapping[int, int], root: int) -> tuple[int, int]:
    """How many links a verdict is from its root, then its place: consequences said nearest first."""
    depth, at = 0, index
    while at != root and at in causes and depth <= len(causes):
        at, depth = causes[at], depth + 1
    return depth, index


def _deadlock(first: Verdict, others: list[Verdict]) -> Verdict:
    """Hangs in different groups waiting on each other, as one deadlock told from `first`."""
    suspects = frozenset(rank for verdict in (first, *others) for rank in verdict.suspects)
    return dataclasses.replace(first, kind="deadlock", text=first.link, suspects=suspects)
