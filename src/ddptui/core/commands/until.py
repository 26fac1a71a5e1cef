"""`:until-collective`: run every target rank to its next collective, then say whether they agree.

Each target rank at a prompt is armed (`UntilArm` request: the rank stops before the next
collective its main thread calls from Python) and sent `c` in lockstep. Once every one is back
at a prompt, waiting or gone, each says what it is about to enter; one table shows the ranks
side by side. Consistent ranks stay stopped before the collective, ready for a lockstep `n`. On a
mismatch every rank stays at its prompt and the stopped ones are *held*: a command that would run
the mismatched collective reopens the prompt instead, until `release`. Nothing runs a collective
the ranks disagree on, and nothing waits for ever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ddptui.core.commands.plain_table import plain_table
from ddptui.core.commands.result import Result
from ddptui.core.diagnosis.collective_records import WORLD, Record
from ddptui.core.diagnosis.collectives import RankStatus, diagnose
from ddptui.core.model.state import Phase
from ddptui.core.model.targets import format_ranks, name_ranks
from ddptui.core.model.topology import Topology
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError, answered
from ddptui.rank.asks import Collectives, UntilArm, UntilHold, UntilPending, UntilRelease

R = TypeVar("R")

ASK_TIMEOUT = 10.0
"""Seconds a rank has to say what it is about to enter (it reads its Flight Recorder)."""
"""Group descriptions torch gives a group no one named."""
RELEASE_HINT = "!n runs it anyway"
"""How a held rank's user gets past the hold, as the rank prints it."""


@dataclass(frozen=True)
class Stop:
    """Where one target rank ended up: before (or inside) a collective, or just its state."""

    rank: int
    state: str
    """The rank's state in words: `paused at train.py:8`, `exited 0`, `waiting at ... in backward`."""
    record: Record | None = None
    inside: bool = False
    """The rank already waits inside `record` (a collective the stop could not see: C++, DDP)."""
    members: frozenset[int] | None = None
    """The global ranks of `record`'s process group, when known."""
    peer: int | None = None
    """The root of a rooted collective, or the other end of a send/recv."""
    via: str = ""
    """The torch function the user called, when it is not `record.op` (`all_gather_object`)."""
    batch: tuple[Leg, ...] = ()
    """The sends and receives of the batch `record` is the first of (`batch_isend_irecv`)."""


@dataclass(frozen=True)
class Leg:
    """One send or receive a rank stands before; a batch of them makes one stop."""

    rank: int
    op: str
    peer: int | None
    tensors: str
    """`[3] float32`: what must match at the other end."""

    @property
    def what(self) -> str:
        """`isend [3] float32`."""
        return f"{self.op} {self.tensors}"


@dataclass(frozen=True)
class Finding:
    """One line of the verdict; `ranks` hold a mismatched collective when `mismatch`."""

    text: str
    mismatch: bool = False
    problem: bool = False
    ranks: frozenset[int] = frozenset()


async def until_collective(session: Session, targets: Iterable[int] | None = None) -> Result:
    """Run the target ranks to their next collective; a table, and whether they may enter it together."""
    ranks = session.live(targets)
    if not ranks:
        return Result(("no live rank to send it to",), error=True)
    indices = [rank.index for rank in ranks]
    await session.wait_settled(indices)
    ready = [r.index for r in session.live(indices) if r.state.at_prompt and not r.state.post_mortem]
    if not ready:
        return Result(("no target rank is at a prompt it can run on from",), error=True)
    answers = await session.ask(UntilArm(), ready)
    armed = list(answered(answers))
    cleared = (await session.broadcast("c", armed)).cleared_lines() if armed else []
    stops = await gather(session, indices, frozenset(armed))
    states = {rank.index: rank.state.describe() for rank in session.ranks}
    findings = verdict(stops, states)
    for finding in findings:
        if finding.mismatch:
            why = f"{finding.text}; {RELEASE_HINT}"
            await session.ask(UntilHold(why), sorted(finding.ranks))
    notes = [f"rank {i} not armed: {a}" for i, a in answers.items() if i not in armed]
    lines = [finding.text for finding in findings] + table(stops) + cleared + notes
    return Result(tuple(lines), error=any(f.problem for f in findings) or bool(notes))


async def release(session: Session, targets: Iterable[int] | None = None) -> None:
    """Let held ranks enter the collective they stopped before (`!n`: the user insists)."""
    held = [rank.index for rank in session.live(targets) if rank.state.at_prompt]
    if held:
        await session.ask(UntilRelease(), held)


async def gather(session: Session, indices: Sequence[int], armed: frozenset[int]) -> list[Stop]:
    """Where each target rank ended up: asked for its pending collective, or its state."""
    live = {rank.index: rank for rank in session.live(indices)}
    paused = [i for i in indices if i in live and live[i].state.at_prompt and not live[i].state.post_mortem]
    waiting = [i for i in indices if i in live and live[i].state.phase is Phase.WAITING]
    pending = await session.ask(UntilPending(), paused, ASK_TIMEOUT)
    last = await session.ask(Collectives(last=1), waiting, ASK_TIMEOUT)
    stops = []
    await session.topology_reader.read()
    for index in indices:
        state = session.ranks[index].state.describe()
        if index in pending:
            stops.append(stop_from(index, state, _value(pending[index]), inside=False))
        elif index in last:
            entries = _value(last[index])
            entry = entries[-1] if entries else None
            if index in armed:
                state += " (stops before its next collective)"
            stops.append(stop_from(index, state, entry, inside=True))
        else:
            stops.append(Stop(index, state))
    return [_named(stop, session.topology) for stop in stops]


def _named(stop: Stop, topology: Topology) -> Stop:
    """The stop with its collective's group named in the user's words."""
    if stop.record is None or stop.record.pg == WORLD:
        return stop
    return dataclasses.replace(
        stop,
        record=dataclasses.replace(
            stop.record, pg_name=topology.group_name(stop.record.pg, stop.record.pg_desc)
        ),
    )


def _value(answer: R | RequestError) -> R | None:
    """A reply's value; None for an error or no answer."""
    return None if isinstance(answer, RequestError) else answer


def stop_from(rank: int, state: str, value: object, inside: bool) -> Stop:
    """A rank's stop from its `pending` answer (or, `inside`, its last collective while waiting)."""
    if not isinstance(value, dict):
        return Stop(rank, state)
    try:
        record = Record.from_json(value)
    except ValueError:
        return Stop(rank, state)
    if inside and not record.pending:
        return Stop(rank, state)
    members = value.get("members")
    peer = value.get("peer")
    return Stop(
        rank,
        state,
        record,
        inside,
        frozenset(members) if isinstance(members, list) else None,
        peer if isinstance(peer, int) else None,
        str(value.get("via") or ""),
        _batch(rank, value.get("batch")),
    )


def _batch(rank: int, legs: object) -> tuple[Leg, ...]:
    """The legs of a batch as a rank sent them (`op`, `peer`, `shapes`, `dtypes` each); () if none."""
    if not isinstance(legs, list):
        return ()
    batch = []
    for leg in legs:
        try:
            record = Record.from_json(dict(leg, seq=0))
        except (TypeError, ValueError):
            return ()
        peer = leg.get("peer")
        batch.append(Leg(rank, record.op, peer if isinstance(peer, int) else None, _tensors(record)))
    return tuple(batch)


# -- the verdict ------------------------------------------------------------------------------------


def verdict(stops: Sequence[Stop], states: Mapping[int, str]) -> list[Finding]:
    """One finding per process group the ranks stopped in, then point-to-point ops; `states` holds
    every rank of the job in words (a group member outside the targets is named by it).
    """
    groups: dict[str, list[Stop]] = {}
    for stop in stops:
        if stop.record is not None and not stop.record.p2p:
            groups.setdefault(stop.record.pg, []).append(stop)
    named = len(groups) > 1  # several groups (a 2-D mesh): say which ranks each line is about
    findings = [_group_finding(pg, group, states, named) for pg, group in groups.items()]
    findings += _p2p_findings([s for s in stops if s.record is not None and s.record.p2p], states)
    if not findings:
        rest = _grouped({stop.rank: stop.state for stop in stops})
        findings.append(Finding(f"no target rank stopped before a collective: {rest}"))
    return findings


def _group_finding(pg: str, group: list[Stop], states: Mapping[int, str], named: bool = False) -> Finding:
    """Whether the ranks stopped in one process group may enter their collective together
    (`named`: say which ranks, not `all 2 ranks`)."""
    stopped = frozenset(stop.rank for stop in group if not stop.inside)
    seqs = {stop.record.seq for stop in group if stop.record is not None}
    if len(seqs) > 1:
        parts = ", ".join(f"rank {stop.rank} {_entry(stop)}" for stop in group)
        record = next(stop.record for stop in group if stop.record is not None)
        text = f"mismatch: the ranks stand before different collectives{_on(record)}: {parts}"
        return Finding(text, mismatch=True, problem=True, ranks=stopped)
    differ = _mismatch(group)
    if differ:
        return Finding(f"mismatch: {differ}", mismatch=True, problem=True, ranks=stopped)
    first = group[0]
    assert first.record is not None
    what = f"{_where(first.record)} {first.record.what()}"
    there = frozenset(stop.rank for stop in group)
    inside = sorted(stop.rank for stop in group if stop.inside)
    already = f" ({name_ranks(inside)} already waiting in it)" if inside else ""
    members = first.members or there
    missing = sorted(members - there)
    if not missing:
        who = name_ranks(there) if named else f"all {len(there)} ranks"
        return Finding(f"{who} about to enter {what}{already}")
    absent = _grouped({rank: states.get(rank, "not known") for rank in missing})
    text = f"{name_ranks(there)} about to enter {what}{already}; not there: {absent}"
    return Finding(text, problem=True)


def _mismatch(group: list[Stop]) -> str:
    """How the ranks' collectives at one sequence number differ (op, shapes, dtypes, root); empty if not."""
    logs = {stop.rank: [stop.record] for stop in group if stop.record is not None}
    statuses = {rank: RankStatus("paused") for rank in logs}
    for found in diagnose(logs, statuses):
        if found.kind == "mismatch":
            return found.text
    roots: dict[int, list[int]] = {}
    for stop in group:
        if stop.peer is not None:  # a rank already waiting in it (its log's record) names no root
            roots.setdefault(stop.peer, []).append(stop.rank)
    if len(roots) > 1 and group[0].record is not None:
        record = group[0].record
        parts = ", ".join(f"{name_ranks(ranks)} root {root}" for root, ranks in sorted(roots.items()))
        return f"collective {_where(record)} {record.op} differs: {parts}"
    return ""


SENDS = ("send", "isend")
RECVS = ("recv", "irecv")


def _p2p_findings(stops: list[Stop], states: Mapping[int, str]) -> list[Finding]:
    """A send must meet, on its peer, a recv from it (or from any rank) of the same shape and
    dtype; the legs of a batch meet theirs in any order."""
    legs = [leg for stop in stops for leg in _legs(stop)]
    by_rank = {stop.rank: stop for stop in stops}
    findings, met = [], set()
    for leg in legs:
        if leg.op not in SENDS or leg.peer is None:
            continue
        mine = f"rank {leg.rank} about to {leg.what} to rank {leg.peer}"
        theirs = [
            i for i, other in enumerate(legs) if other.rank == leg.peer and other.op in RECVS and i not in met
        ]
        if not theirs:
            other = by_rank.get(leg.peer)
            found = other.state if other is not None else states.get(leg.peer, "not known")
            findings.append(Finding(f"{mine}; not there: rank {leg.peer} {found}", problem=True))
            continue
        match = next((i for i in theirs if legs[i].peer in (None, leg.rank)), theirs[0])
        met.add(match)
        findings.append(_meets(leg, legs[match], mine))
    for i, leg in enumerate(legs):
        if leg.op in RECVS and i not in met:
            source = "any rank" if leg.peer is None else f"rank {leg.peer}"
            text = f"rank {leg.rank} about to {leg.what} from {source}, which is not sending to it"
            findings.append(Finding(text, problem=True))
    return findings


def _legs(stop: Stop) -> tuple[Leg, ...]:
    """The sends and receives a point-to-point stop stands before: its batch, or its one op."""
    if stop.batch:
        return stop.batch
    assert stop.record is not None
    return (Leg(stop.rank, stop.record.op, stop.peer, _tensors(stop.record)),)


def _meets(send: Leg, recv: Leg, mine: str) -> Finding:
    """Whether `send` (`mine`, in words) and the receive on its peer match."""
    pair = frozenset({send.rank, recv.rank})
    if recv.peer not in (None, send.rank):
        return Finding(
            f"mismatch: {mine}, but rank {recv.rank} receives from rank {recv.peer}", True, True, pair
        )
    if recv.tensors != send.tensors:
        return Finding(f"mismatch: {mine}, but rank {recv.rank} receives {recv.tensors}", True, True, pair)
    return Finding(f"{mine}, which is about to receive it")


def _tensors(record: Record) -> str:
    """`[3] float32`: what `record.what()` says after the op."""
    return record.what().partition(" ")[2] or "no tensors"


def _entry(stop: Stop) -> str:
    """`#3 all_reduce [3] float32 (train.py:8)`."""
    assert stop.record is not None
    seq = f"{_where(stop.record)} " if stop.record.seq else ""
    return f"{seq}{stop.record.describe()}"


def _where(record: Record) -> str:
    """`#3`, or `#3 on tp group [2,3] (dp=1)` outside the default group."""
    return f"#{record.seq}{_on(record)}"


def _on(record: Record) -> str:
    """` on tp group [2,3] (dp=1)`: the record's group as `Topology.group_name` names it (the name
    the stop was given, else its own description: ` on group 3 (mesh_tp)`); nothing for the default group."""
    if record.pg == WORLD:
        return ""
    return f" on {record.pg_name or Topology().group_name(record.pg, record.pg_desc)}"


def _grouped(states: Mapping[int, str]) -> str:
    """`rank 1 exited 0; ranks 2-3 paused at train.py:5`: ranks in the same state said once."""
    groups: dict[str, set[int]] = {}
    for rank, state in states.items():
        groups.setdefault(state, set()).add(rank)
    return "; ".join(f"{name_ranks(ranks)} {state}" for state, ranks in groups.items())


# -- the table --------------------------------------------------------------------------------------

HEADER = ("rank", "seq", "op", "shapes", "dtypes", "at")
"""The table's columns."""


def table(stops: Sequence[Stop]) -> list[str]:
    """One row per distinct stop (ranks that stand alike share one): rank, seq, op, shapes, dtypes,
    file:line; a rank not before a collective shows its state across the op columns.
    """
    rows: dict[tuple[str, ...], set[int]] = {}
    for stop in stops:
        rows.setdefault(_cells(stop), set()).add(stop.rank)
    return plain_table(HEADER, [(format_ranks(ranks), *cells) for cells, ranks in rows.items()])


def _cells(stop: Stop) -> tuple[str, ...]:
    """The row of one stop, without its rank."""
    record = stop.record
    if record is None:
        return ("-", stop.state)
    shapes = ",".join("[" + ",".join(map(str, shape)) + "]" for shape in record.shapes) or "-"
    dtypes = ",".join(dict.fromkeys(record.dtypes)) or "-"
    op = record.op + (f" in {stop.via}" if stop.via else "")
    if stop.peer is not None:
        op += f" {'to' if record.op in SENDS else 'from' if record.p2p else 'root'} {stop.peer}"
    if len(stop.batch) > 1:
        op += f" (1 of {len(stop.batch)})"
    at = str(record.site) if record.site else "-"
    at += " (waiting in it)" if stop.inside else ""
    return (_where(record) if record.seq else "-", op, shapes, dtypes, at)
