"""One process group's collectives across its ranks: hangs, deadlocks, mismatches and skips in it.

Collectives pair across ranks by sequence number within their process group. A rank that skips
one collective in a loop shifts that pairing: its later collectives pair with its peers' next
ones, often without any error until an op or a shape differs, or until the last one waits for
ever. Call sites tell that story apart from a real shape mismatch, so a verdict names the skip.
Pure logic on records (no I/O, no torch); `collectives.diagnose` runs it for every group.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ddptui.core.diagnosis.collective_records import WORLD, Record
from ddptui.core.diagnosis.collective_verdict import UNKNOWN, RankStatus, Verdict
from ddptui.core.model.targets import name_ranks

MAX_SHIFT = 16
"""Most collectives one rank may have skipped in a row for the skip story to be told."""


class GroupCheck:
    """One process group's collectives across its ranks, and the questions asked of them."""

    def __init__(
        self,
        pg: str,
        name: str,
        logs: Mapping[int, Sequence[Record]],
        statuses: Mapping[int, RankStatus],
        members: Collection[int] | None = None,
    ) -> None:
        """`members`: the group's ranks when the topology says; else those that issued in it."""
        self.pg = pg
        self.name = name
        """The group in the user's words (`tp group [2,3] (dp=1)`); empty for a job's only group."""
        self.statuses = statuses
        self.seqs: dict[int, dict[int, Record]] = {
            rank: {r.seq: r for r in log if r.pg == pg and not r.p2p} for rank, log in logs.items()
        }
        world = pg == WORLD or any(r.pg_desc == "default_pg" for s in self.seqs.values() for r in s.values())
        if not world:  # a rank that issued nothing in it is in it only if the topology says so
            self.seqs = {r: seqs for r, seqs in self.seqs.items() if seqs or (members and r in members)}
        known = set(statuses) - set(logs)
        self.unlogged = sorted(known if world else known & set(members or ()))
        self.last = {rank: max(seqs, default=0) for rank, seqs in self.seqs.items()}
        self.final = {rank: final for rank, log in logs.items() if (final := last_collective(log))}
        """Each rank's last collective in any group, `(pg, seq)`: the one a crashed rank crashed in."""

    def where(self, seq: int, to: int | None = None) -> str:
        """`#3` (`#3-#4` up `to`), after the group's name when it has one: `group [0,1] #3`."""
        span = f"#{seq}" if to is None or to == seq else f"#{seq}-#{to}"
        return f"{self.name} {span}" if self.name else span

    def collective(self, seq: int) -> str:
        """`collective #3` in a job's only group, `group [0,1] #3` in a job of several."""
        return self.where(seq) if self.name else f"collective #{seq}"

    def status(self, rank: int) -> RankStatus:
        """A rank's status, UNKNOWN when not given."""
        return self.statuses.get(rank, UNKNOWN)

    # -- ranks stuck in a collective a peer never issued ----------------------------------------

    def entered(self) -> dict[int, int]:
        """Ranks standing in their last collective: waiting in it, or crashed (out of it, often).

        A rank paused or running has returned from a collective its recorder still shows issued
        (retirement lags): it is not counted. A crashed rank is, in its last collective of all
        groups: with gloo, a peer's exit fails a pending collective (`Connection closed by peer`),
        which the recorder shows as completed.
        """
        stuck = {}
        for rank, last in self.last.items():
            status = self.status(rank)
            if last and (
                (status.phase == "crashed" and self.final.get(rank) == (self.pg, last))
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
        what = f"{self.collective(seq)} {record.describe()}"
        link = self._link(seq, record, inside, waiting, missing)
        if all(self.status(rank).gone for rank in missing):
            verb = "wait in" if waiting == inside else "crashed in" if not waiting else "entered"
            verb = verb.replace("wait in", "waits in") if len(inside) == 1 else verb
            gone = "; ".join(self._grouped(missing, self._exit_phrase))
            text = f"{gone}, but {name_ranks(inside)} {verb} {what}"
            return Verdict(
                "early exit",
                text,
                self.pg,
                seq,
                frozenset(missing),
                waiting=frozenset(waiting),
                about=what,
                link=link,
            )
        are = "is" if len(missing) == 1 else "are"
        text = f"{name_ranks(missing)} {are} missing from {what}; " + "; ".join(
            self._grouped(missing, self._phrase)
        )
        return Verdict(
            "hang", text, self.pg, seq, frozenset(missing), waiting=frozenset(waiting), about=what, link=link
        )

    def _link(
        self, seq: int, record: Record, inside: list[int], waiting: list[int], missing: list[int]
    ) -> str:
        """`rank 0 waits in WORLD #2 barrier (train.py:14) for ranks 2-3; rank 1 crashed there`."""
        where = f"{self.where(seq) if self.name else f'#{seq}'} {record.describe(shapes=False)}"
        crashed = [rank for rank in inside if rank not in waiting]
        if not waiting:
            return f"{name_ranks(crashed)} crashed in {where} without {name_ranks(missing)}"
        verb = "waits" if len(waiting) == 1 else "wait"
        text = f"{name_ranks(waiting)} {verb} in {where} for {name_ranks(missing)}"
        return f"{text}; {name_ranks(crashed)} crashed there" if crashed else text

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
            return "issued no collective" + (f" in {self.name}" if self.name else "")
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
                verdicts.append(Verdict("deadlock", text, self.pg, seq, suspects, about=self.collective(seq)))
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
        about = f"{self.collective(seq)}{op}"
        text = f"{about} differs: {differ}"
        return [Verdict("mismatch", text, self.pg, seq, suspects, about=about)]

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
        count = f"{count} {span}" if not self.name else span if shift == 1 else f"{count} of {span}"
        if skipped:
            did = f"skipped {count} {gap} that rank {reference} issued"
        else:
            extra = "an extra " if shift == 1 else "extra "
            did = f"issued {extra}{count} {gap} that rank {reference} did not"
        after = f"from there its #n pairs with rank {reference}'s #n{'+' if skipped else '-'}{shift}"
        text = f"rank {rank} {did}; {after}"
        return Verdict("skip", text, self.pg, start, frozenset({rank}), about=f"{count} {gap}")


def last_collective(log: Sequence[Record]) -> tuple[str, int] | None:
    """`(pg, seq)` of the last collective (not point-to-point) of a rank's log, oldest first."""
    final = next((record for record in reversed(log) if not record.p2p), None)
    return None if final is None else (final.pg, final.seq)


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
