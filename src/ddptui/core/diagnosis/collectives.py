"""Verdicts from every rank's collectives: hangs, deadlocks, mismatches, skips and early exits.

Pure logic on the records `ddptui.rank.collectives.collective_log` sends (no I/O, no torch).
Collectives pair across ranks by sequence number within their process group. A rank that skips
one collective in a loop shifts that pairing: its later collectives pair with its peers' next
ones, often without any error until an op or a shape differs, or until the last one waits for
ever. Call sites tell that story apart from a real shape mismatch, so a verdict names the skip.

The records themselves (`Record`, `parse_log`) are `collective_records`'; the `:collectives` table
is `collectives_table`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddptui.core.diagnosis.collective_records import WORLD, Record, process_groups
from ddptui.core.diagnosis.p2p import p2p_verdicts
from ddptui.core.diagnosis.verdict_terms import UNKNOWN as UNKNOWN
from ddptui.core.diagnosis.verdict_terms import RankStatus as RankStatus
from ddptui.core.diagnosis.verdict_terms import Verdict as Verdict
from ddptui.core.model.targets import name_ranks

MAX_SHIFT = 16
"""Most collectives one rank may have skipped in a row for the skip story to be told."""


def verdict_lines(
    logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus] | None = None
) -> list[str]:
    """`diagnose`, one line per verdict."""
    return [str(verdict) for verdict in diagnose(logs, statuses)]


def diagnose(
    logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus] | None = None
) -> list[Verdict]:
    """Every verdict the ranks' collectives and states support; empty when all is consistent.

    `logs` holds the ranks whose records are known; `statuses` may name more (a rank that exited
    before it could be asked). Without a status, a rank whose last collective has not returned
    counts as waiting in it.
    """
    statuses = statuses or {}
    verdicts: list[Verdict] = []
    for pg in process_groups(logs):
        group = _Group(pg, logs, statuses)
        skips = group.divergence()
        hangs = group.hangs()
        explained = {rank for verdict in skips for rank in verdict.suspects}
        for verdict in hangs:
            if verdict.kind in ("hang", "early exit"):
                skips += group.hang_skips(verdict, explained)
        deadlocks = group.deadlocks()
        locked = {verdict.seq for verdict in deadlocks}
        # Ranks waiting in different ops differ there too: the deadlock already says so; and while
        # every rank is still inside such ops, it is a deadlock in the making, not yet a mismatch.
        skips = [
            v for v in skips if not (v.kind == "mismatch" and (v.seq in locked or group.ops_in_flight(v.seq)))
        ]
        verdicts += hangs + deadlocks + skips
    return verdicts + p2p_verdicts(logs, statuses)


class _Group:
    """One process group's collectives across its ranks, and the questions asked of them."""

    def __init__(
        self, pg: str, logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus]
    ) -> None:
        self.pg = pg
        self.statuses = statuses
        self.seqs: dict[int, dict[int, Record]] = {
            rank: {r.seq: r for r in log if r.pg == pg and not r.p2p} for rank, log in logs.items()
        }
        world = pg == WORLD or any(r.pg_desc == "default_pg" for s in self.seqs.values() for r in s.values())
        if not world:
            self.seqs = {rank: seqs for rank, seqs in self.seqs.items() if seqs}
        self.unlogged = sorted(set(statuses) - set(logs)) if world else []
        self.last = {rank: max(seqs, default=0) for rank, seqs in self.seqs.items()}

    def where(self, seq: int, to: int | None = None) -> str:
        """`#3` (`#3-#4` up `to`), with ` on group 1` outside the default group."""
        span = f"#{seq}" if to is None or to == seq else f"#{seq}-#{to}"
        return span if self.pg == WORLD else f"{span} on group {self.pg}"

    def status(self, rank: int) -> RankStatus:
        """A rank's status, UNKNOWN when not given."""
        return self.statuses.get(rank, UNKNOWN)

    # -- ranks stuck in a collective a peer never issued ----------------------------------------

    def entered(self) -> dict[int, int]:
        """Ranks standing in their last collective: waiting in it, or crashed (out of it, often).

        A rank paused or running has returned from a collective its recorder still shows issued
        (retirement lags): it is not counted. A crashed rank is: with gloo, a peer's exit fails a
        pending collective (`Connection closed by peer`), which the recorder shows as completed.
        """
        stuck = {}
        for rank, last in self.last.items():
            status = self.status(rank)
            if last and (
                status.phase == "crashed"
                or (status.phase in ("waiting", "") and self.seqs[rank][last].pending)
            ):
                stuck[rank] = last
        return stuck

    def hangs(self) -> list[Verdict]:
        """A hang (or early exit) per collective some ranks entered and some members never issued."""
        entered = self.entered()
        verdicts = []
        for seq in sorted(set(entered.values())):
            inside = sorted(rank for rank, at in entered.items() if at == seq)
            missing = [rank for rank, last in self.last.items() if last < seq]
            missing += [
                rank
                for rank in self.unlogged
                if self.status(rank).gone or self.status(rank).phase == "crashed"
            ]
            if missing:
                verdicts.append(self._hang(seq, inside, sorted(missing)))
        return verdicts

    def _hang(self, seq: int, inside: list[int], missing: list[int]) -> Verdict:
        """The verdict for ranks `inside` collective `seq` while `missing` never issued it."""
        waiting = [rank for rank in inside if self.status(rank).phase != "crashed"]
        record = self.seqs[(waiting or inside)[0]][seq]
        what = f"collective {self.where(seq)} {record.describe()}"
        if all(self.status(rank).gone for rank in missing):
            verb = "wait in" if waiting == inside else "crashed in" if not waiting else "entered"
            verb = verb.replace("wait in", "waits in") if len(inside) == 1 else verb
            gone = "; ".join(self._grouped(missing, self._exit_phrase))
            return Verdict(
                "early exit",
                f"{gone}, but {name_ranks(inside)} {verb} {what}",
                self.pg,
                seq,
                frozenset(missing),
            )
        are = "is" if len(missing) == 1 else "are"
        text = f"{name_ranks(missing)} {are} missing from {what}; " + "; ".join(
            self._grouped(missing, self._phrase)
        )
        return Verdict("hang", text, self.pg, seq, frozenset(missing))

    def _grouped(self, ranks: list[int], phrase: Callable[[int, bool], str]) -> list[str]:
        """`phrase(rank, plural)` per rank, ranks with the same phrase said once: `ranks 1,3 ...`."""
        groups: dict[str, list[int]] = {}
        for rank in ranks:
            groups.setdefault(phrase(rank, False), []).append(rank)
        return [f"{name_ranks(group)} {phrase(group[0], len(group) > 1)}" for group in groups.values()]

    def _history(self, rank: int) -> str:
        """`completed #2`, `issued #2`, `issued no collective`, or `` for a rank with no records."""
        if rank not in self.seqs:
            return ""
        last = self.last[rank]
        if not last:
            return "issued no collective" + ("" if self.pg == WORLD else f" on group {self.pg}")
        return f"{'issued' if self.seqs[rank][last].pending else 'completed'} {self.where(last)}"

    def _phrase(self, rank: int, plural: bool) -> str:
        """`completed #2 and is at train.py:11 in sleep` (`are` for several ranks)."""
        now = self.status(rank).now()
        if plural:
            now = now.replace("is ", "are ", 1) if now.startswith("is ") else now
        history = self._history(rank)
        return " and ".join(part for part in (history, now) if part) or "has no record"

    def _exit_phrase(self, rank: int, plural: bool) -> str:
        """`exited 0 after #2`, `exited 0 before any collective`."""
        history = self._history(rank)
        state = self.status(rank).state
        if not history:
            return state
        return (
            f"{state} before any collective"
            if history.startswith("issued no")
            else f"{state} after {history.split(' ', 1)[1]}"
        )

    def hang_skips(self, hang: Verdict, explained: set[int]) -> list[Verdict]:
        """Skips that explain a hang: the missing ranks skipped one, or (when they are the majority)
        the ranks inside issued an extra one.
        """
        inside = sorted(rank for rank, at in self.entered().items() if at == hang.seq)
        missing = sorted(rank for rank in hang.suspects if rank in self.seqs)
        if not inside or not missing:
            return []
        odd, reference = (inside, missing[0]) if len(missing) > len(inside) else (missing, inside[0])
        found = []
        for rank in odd:
            verdict = None if rank in explained else self._skip(rank, reference, self.last[missing[0]])
            if verdict is not None:
                explained.add(rank)
                found.append(verdict)
        return found

    # -- ranks waiting in the same collective with different ops ----------------------------------

    def deadlocks(self) -> list[Verdict]:
        """A deadlock per sequence number where waiting ranks issued different ops."""
        waiting = {rank: at for rank, at in self.entered().items() if self.status(rank).phase != "crashed"}
        verdicts = []
        for seq in sorted(set(waiting.values())):
            by_op: dict[str, list[int]] = {}
            for rank in sorted(rank for rank, at in waiting.items() if at == seq):
                by_op.setdefault(self.seqs[rank][seq].op, []).append(rank)
            if len(by_op) > 1:
                groups = sorted(by_op.values(), key=lambda ranks: (-len(ranks), ranks))
                text = "; ".join(
                    f"{name_ranks(ranks)} {'wait' if len(ranks) > 1 else 'waits'} in {self.where(seq)} "
                    f"{self.seqs[ranks[0]][seq].describe(shapes=False)}"
                    for ranks in groups
                )
                suspects = frozenset(rank for ranks in groups[1:] for rank in ranks)
                verdicts.append(Verdict("deadlock", text, self.pg, seq, suspects))
        return verdicts

    def ops_in_flight(self, seq: int) -> bool:
        """True when ranks issued different ops as collective `seq` and none has returned from it."""
        records = [seqs[seq] for seqs in self.seqs.values() if seq in seqs]
        return len({record.op for record in records}) > 1 and all(record.pending for record in records)

    # -- the first collective whose op, shapes or dtypes differ ----------------------------------

    def divergence(self) -> list[Verdict]:
        """The first collective differing across ranks: skips if call sites explain it, else a mismatch."""
        for seq in sorted({seq for seqs in self.seqs.values() for seq in seqs}):
            present = {rank: seqs[seq] for rank, seqs in self.seqs.items() if seq in seqs}
            kinds: dict[tuple[Any, ...], list[int]] = {}
            for rank, record in sorted(present.items()):
                kinds.setdefault(record.signature(), []).append(rank)
            if len(kinds) > 1:
                return self._explain(seq, sorted(kinds.values(), key=lambda ranks: (-len(ranks), ranks)))
        return []

    def _explain(self, seq: int, groups: list[list[int]]) -> list[Verdict]:
        """Skips for every odd rank out when shifted pairing explains them all, else one mismatch."""
        reference = groups[0][0]
        skips = [self._skip(rank, reference, seq) for ranks in groups[1:] for rank in ranks]
        if skips and all(skip is not None for skip in skips):
            return [skip for skip in skips if skip is not None]
        records = [self.seqs[ranks[0]][seq] for ranks in groups]
        ops = {record.op for record in records}
        differ = ", ".join(
            f"{name_ranks(ranks)} {_variant(record, len(ops) > 1)}"
            for ranks, record in zip(groups, records, strict=True)
        )
        op = f" {records[0].op}" if len(ops) == 1 else ""
        suspects = frozenset(rank for ranks in groups[1:] for rank in ranks)
        return [
            Verdict("mismatch", f"collective {self.where(seq)}{op} differs: {differ}", self.pg, seq, suspects)
        ]

    def _skip(self, rank: int, reference: int, upto: int) -> Verdict | None:
        """A skip verdict when `rank`'s collectives pair with `reference`'s once shifted, from the
        first call-site difference at or before `upto` on; None when no shift explains them.
        """
        mine, theirs = self.seqs[rank], self.seqs[reference]
        starts = [s for s in sorted(mine) if s <= upto and s in theirs and not mine[s].same_as(theirs[s])]
        for start in starts[-32:]:
            for shift in range(1, MAX_SHIFT + 1):
                if _aligned(mine, theirs, start, shift):
                    return self._skip_verdict(rank, reference, start, shift, skipped=True)
                if _aligned(theirs, mine, start, shift):
                    return self._skip_verdict(rank, reference, start, shift, skipped=False)
        return None

    def _skip_verdict(self, rank: int, reference: int, start: int, shift: int, skipped: bool) -> Verdict:
        """`rank 1 skipped collective #3 all_reduce [3] float32 (train.py:10) that rank 0 issued; ...`."""
        source = self.seqs[reference if skipped else rank]
        gap = ", ".join(source[seq].describe() for seq in range(start, start + shift) if seq in source)
        span = self.where(start, start + shift - 1)
        count = "collective" if shift == 1 else f"{shift} collectives"
        if skipped:
            did = f"skipped {count} {span} {gap} that rank {reference} issued"
        else:
            extra = "an extra" if shift == 1 else "extra"
            did = f"issued {extra} {count} {span} {gap} that rank {reference} did not"
        after = f"from there its #n pairs with rank {reference}'s #n{'+' if skipped else '-'}{shift}"
        return Verdict("skip", f"rank {rank} {did}; {after}", self.pg, start, frozenset({rank}))


def _variant(record: Record, with_op: bool) -> str:
    """One side of a mismatch: `[3] float32 (train.py:8)`, with the op first when ops differ."""
    text = record.what() if with_op else record.what().partition(" ")[2] or "no tensors"
    return f"{text} ({record.site})" if record.site else text


def _aligned(short: Mapping[int, Record], long: Mapping[int, Record], start: int, shift: int) -> bool:
    """True when `short[s]` matches `long[s + shift]` for every `s >= start` both have (at least one)."""
    compared = 0
    for seq in sorted(s for s in short if s >= start):
        other = long.get(seq + shift)
        if other is None:
            continue
        if not short[seq].same_as(other):
            return False
        compared += 1
    return compared > 0
