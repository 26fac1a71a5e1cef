"""Verdicts from every rank's point-to-point ops: ranks waiting on each other (a deadlock), and a
rank waiting on an op its peer never issued (a hang, or an early exit when the peer is gone).

Pure logic on the records ddptui's wrappers send (`ddptui.rank.p2p`; no I/O, no torch). Sends and
receives pair by group, sender, receiver, tag and sequence number: the k-th send from rank a to
rank b meets b's k-th recv from a, as gloo pairs them. A rank waits in an op while it is inside
it: a blocking `send` or `recv` that has not returned, or an `isend`/`irecv` whose work it waits
on (`started`). It is stuck when its peer has not issued the other side; stuck ranks each waiting
on another stuck one wait for ever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddptui.core.diagnosis.collective_records import Record
from ddptui.core.diagnosis.collective_verdict import UNKNOWN, RankStatus, Verdict

Key = tuple[str, int, int, int, int]
"""What pairs a send with a recv: group, sender, receiver, tag, sequence number."""
BLOCKING = frozenset({"send", "recv"})
"""Ops the rank stays inside until they are done."""
NOT_SENT = {"recv": "never sent it", "send": "never posted its recv"}
"""What the peer of a stuck op did not do, by the op's direction."""


def p2p_verdicts(
    logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus] | None = None
) -> list[Verdict]:
    """Deadlocks, then hangs and early exits, of the ranks' point-to-point ops.

    Like the collective verdicts, a rank without a status counts as waiting when its records say
    it is inside an op. A verdict's `pg` says `p2p` beside the group (and, for a hang, which way
    the data goes), so it is never taken for a collective verdict with the same numbers.
    """
    exchange = _Exchange(logs, statuses or {})
    return exchange.deadlocks() + exchange.hangs()


def toward(record: Record) -> str:
    """`→ 1` for a send to rank 1, `← 0` for a recv from rank 0, `← any` from any rank."""
    peer = "any" if record.peer is None else str(record.peer)
    return f"→ {peer}" if record.direction == "send" else f"← {peer}"


def _doing(record: Record) -> str:
    """`recv from rank 1 (train.py:8)`, `isend to rank 2 (train.py:9)`."""
    peer = "any rank" if record.peer is None else f"rank {record.peer}"
    where = f" ({record.site})" if record.site else ""
    return f"{record.op} {'to' if record.direction == 'send' else 'from'} {peer}{where}"


def _key(rank: int, record: Record) -> Key | None:
    """The pairing key of one rank's op; None for a recv from any rank still waiting for a sender."""
    if record.peer is None:
        return None
    sender, receiver = (rank, record.peer) if record.direction == "send" else (record.peer, rank)
    return record.pg, sender, receiver, record.tag, record.seq


def _keys(rank: int, ops: Sequence[Record], direction: str) -> list[Key]:
    """The pairing keys of one rank's ops in one direction."""
    keys = (_key(rank, record) for record in ops if record.direction == direction)
    return [key for key in keys if key is not None]


class _Exchange:
    """The ranks' point-to-point ops, paired; who waits in which unpaired op, and on whom."""

    def __init__(self, logs: Mapping[int, Sequence[Record]], statuses: Mapping[int, RankStatus]) -> None:
        self.statuses = statuses
        self.ranks = set(logs) | set(statuses)
        self.ops = {rank: [r for r in log if r.p2p and r.direction] for rank, log in logs.items()}
        self.sent = {key for rank, ops in self.ops.items() for key in _keys(rank, ops, "send")}
        self.received = {key for rank, ops in self.ops.items() for key in _keys(rank, ops, "recv")}
        self.stuck: dict[int, Record] = {}
        """Ranks waiting in an op whose other side was never issued, and that op."""
        for rank in sorted(self.ops):
            inside = self._waiting_in(rank)
            if inside is not None and not self._paired(rank, inside):
                self.stuck[rank] = inside
        self.locked = self._locked()

    def status(self, rank: int) -> RankStatus:
        """A rank's status, UNKNOWN when not given."""
        return self.statuses.get(rank, UNKNOWN)

    def _waiting_in(self, rank: int) -> Record | None:
        """The op a waiting rank is inside, if it is inside one."""
        if self.status(rank).phase not in ("waiting", ""):
            return None
        inside = [
            r for r in self.ops[rank] if r.state == "started" or (r.op in BLOCKING and r.state == "issued")
        ]
        return inside[-1] if inside else None

    def _paired(self, rank: int, record: Record) -> bool:
        """True when the peer issued the other side of `record` (so it completes without more)."""
        key = _key(rank, record)
        if key is None:  # a recv from any rank: paired by any send to this rank no recv took
            return any(
                k[0] == record.pg and k[2] == rank and k[3] == record.tag for k in self.sent - self.received
            )
        return key in (self.received if record.direction == "send" else self.sent)

    def awaited(self, rank: int) -> set[int]:
        """The ranks a stuck rank waits on: its peer, or every other rank for a recv from any."""
        peer = self.stuck[rank].peer
        return self.ranks - {rank} if peer is None else {peer}

    def _locked(self) -> set[int]:
        """The stuck ranks that only stuck ranks can release: none of them will ever move."""
        locked = set(self.stuck)
        while True:
            free = {rank for rank in locked if not self.awaited(rank) <= locked}
            if not free:
                return locked
            locked -= free

    def deadlocks(self) -> list[Verdict]:
        """One deadlock per set of locked ranks waiting on each other."""
        verdicts = []
        for ranks in self._circles():
            records = [self.stuck[rank] for rank in ranks]
            directions = {record.direction for record in records}
            last = (
                "no send is pending"
                if directions == {"recv"}
                else "no recv is pending"
                if directions == {"send"}
                else "no matching send or recv is pending"
            )
            text = "; ".join(f"rank {rank} waits in {_doing(self.stuck[rank])}" for rank in ranks)
            first = records[0]
            verdicts.append(
                Verdict("deadlock", f"{text}; {last}", f"{first.pg} p2p", first.seq, frozenset(ranks))
            )
        return verdicts

    def _circles(self) -> list[list[int]]:
        """The locked ranks, split where no wait links them, each part in rank order."""
        parts: list[set[int]] = []
        for rank in sorted(self.locked):
            linked = (self.awaited(rank) & self.locked) | {rank}
            joined = [part for part in parts if part & linked]
            parts = [part for part in parts if not part & linked]
            parts.append(linked.union(*joined))
        return sorted((sorted(part) for part in parts), key=lambda part: part[0])

    def hangs(self) -> list[Verdict]:
        """A hang (or an early exit) per stuck rank its peer could still release, or never will."""
        verdicts = []
        for rank, record in self.stuck.items():
            if rank in self.locked:
                continue
            key = _key(rank, record)
            channel = f"{record.pg} p2p {key[1]}→{key[2]}" if key else f"{record.pg} p2p any→{rank}"
            peer = record.peer
            waits = f"rank {rank} waits in {_doing(record)}"
            if peer is None:
                others = frozenset(self.ranks - {rank})
                verdicts.append(Verdict("hang", f"{waits}; no rank sent to it", channel, 0, others))
                continue
            status = self.status(peer)
            if status.gone:
                text = f"rank {peer} {status.state}, but {waits}"
                verdicts.append(Verdict("early exit", text, channel, record.seq, frozenset({peer})))
                continue
            now = status.now()
            text = f"{waits}; rank {peer} {NOT_SENT[record.direction]}" + (f": it {now}" if now else "")
            verdicts.append(Verdict("hang", text, channel, record.seq, frozenset({peer})))
        return verdicts
