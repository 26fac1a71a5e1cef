"""Point-to-point ops: the rank side's records (on a stand-in for torch.distributed), their pairing
into deadlock and hang verdicts, and their rows in the `:collectives` table."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from ddptui.core.commands.collectives_table import collectives_table
from ddptui.core.commands.p2p_table import p2p_table
from ddptui.core.diagnosis.collective_records import Record, parse_log
from ddptui.core.diagnosis.collectives import RankStatus, diagnose, verdict_lines
from ddptui.core.diagnosis.p2p import p2p_verdicts
from ddptui.rank import collectives, flight_recorder, p2p
from ddptui.rank.protocol import Frame


def op(
    seq: int,
    name: str,
    peer: int | None,
    state: str = "completed",
    line: int = 8,
    shape: tuple[int, ...] = (3,),
    pg: str = "0",
    tag: int = 0,
    t: int = 0,
) -> Record:
    """A point-to-point record of x.py:`line`, as ddptui's wrappers send it."""
    direction = "send" if "send" in name else "recv"
    return Record(
        seq, name, pg, (shape,), ("float32",), state, Frame("/job/x.py", line, "main"),
        p2p=True, peer=peer, direction=direction, tag=tag, time_ns=t,
    )  # fmt: skip


def waiting(where: str) -> RankStatus:
    """A rank the stall watch found idle at `where`."""
    return RankStatus(f"waiting at {where}")


def lines(logs: dict[int, list[Record]], statuses: dict[int, RankStatus] | None = None) -> list[str]:
    """The p2p verdicts, one line each."""
    return [str(verdict) for verdict in p2p_verdicts(logs, statuses)]


# -- records -----------------------------------------------------------------------------------------


def test_records_parse_peer_direction_tag_and_time() -> None:
    item = {"seq": 2, "op": "isend", "p2p": True, "peer": 1, "direction": "send", "tag": 5, "time_ns": 7}
    record = Record.from_json(item)
    assert (record.peer, record.direction, record.tag, record.time_ns) == (1, "send", 5, 7)
    assert Record.from_json({"seq": 1, "op": "all_reduce"}).peer is None
    for bad in ({"peer": "1"}, {"peer": True}, {"direction": "sideways"}):
        assert parse_log([{"seq": 1, "op": "recv", **bad}]) == []


# -- verdicts ------------------------------------------------------------------------------------------


def test_two_ranks_each_in_a_recv_from_the_other_deadlock() -> None:
    logs = {0: [op(1, "recv", 1, "issued")], 1: [op(1, "recv", 0, "issued")]}
    statuses = {0: waiting("x.py:8 in recv"), 1: waiting("x.py:8 in recv")}
    assert lines(logs, statuses) == [
        "deadlock: rank 0 waits in recv from rank 1 (x.py:8); rank 1 waits in recv from rank 0 (x.py:8); "
        "no send is pending"
    ]
    (verdict,) = p2p_verdicts(logs, statuses)
    assert verdict.suspects == frozenset({0, 1})
    assert lines(logs) == lines(logs, statuses)  # no status: the records alone say they wait


def test_a_ring_of_three_deadlocks_and_a_rank_waiting_on_it_is_part_of_it() -> None:
    logs = {rank: [op(1, "irecv", (rank - 1) % 3, "started", line=10)] for rank in range(3)}
    logs[3] = [op(1, "recv", 1, "issued", line=12)]
    assert lines(logs) == [
        "deadlock: rank 0 waits in irecv from rank 2 (x.py:10); rank 1 waits in irecv from rank 0 (x.py:10); "
        "rank 2 waits in irecv from rank 1 (x.py:10); rank 3 waits in recv from rank 1 (x.py:12); "
        "no send is pending"
    ]


def test_ranks_blocked_in_sends_to_each_other_deadlock() -> None:
    logs = {0: [op(1, "send", 1, "issued")], 1: [op(1, "send", 0, "issued", line=9)]}
    assert lines(logs) == [
        "deadlock: rank 0 waits in send to rank 1 (x.py:8); rank 1 waits in send to rank 0 (x.py:9); "
        "no recv is pending"
    ]


def test_two_separate_deadlocks_are_two_verdicts() -> None:
    logs = {r: [op(1, "recv", r ^ 1, "issued")] for r in range(4)}
    assert [v.suspects for v in p2p_verdicts(logs)] == [frozenset({0, 1}), frozenset({2, 3})]


def test_an_unmatched_recv_names_the_rank_that_never_sent() -> None:
    logs = {0: [op(1, "send", 1)], 1: [op(1, "recv", 0), op(2, "recv", 0, "issued", line=12)]}
    statuses = {0: waiting("x.py:20 in barrier"), 1: waiting("x.py:12 in recv")}
    assert lines(logs, statuses) == [
        "hang: rank 1 waits in recv from rank 0 (x.py:12); rank 0 never sent it: it is at x.py:20 in barrier"
    ]
    (verdict,) = p2p_verdicts(logs, statuses)
    assert (verdict.kind, verdict.seq, verdict.suspects, verdict.pg) == (
        "hang",
        2,
        frozenset({0}),
        "0 p2p 0→1",
    )
    statuses[0] = RankStatus("paused at x.py:19")
    assert lines(logs, statuses)[0].endswith("rank 0 never sent it: it is paused at x.py:19")


def test_an_unmatched_send_and_a_peer_that_exited() -> None:
    logs = {0: [op(1, "send", 1, "issued", line=9)], 1: []}
    assert lines(logs, {0: waiting("x.py:9 in send"), 1: waiting("x.py:30 in sleep")}) == [
        "hang: rank 0 waits in send to rank 1 (x.py:9); "
        "rank 1 never posted its recv: it is at x.py:30 in sleep"
    ]
    assert lines(logs, {0: waiting("x.py:9 in send"), 1: RankStatus("exited 0")}) == [
        "early exit: rank 1 exited 0, but rank 0 waits in send to rank 1 (x.py:9)"
    ]


def test_isend_irecv_pairs_completing_say_nothing() -> None:
    logs = {
        0: [op(1, "isend", 1), op(2, "isend", 1, "issued"), op(1, "irecv", 1, "started")],
        1: [op(1, "irecv", 0), op(2, "irecv", 0, "started"), op(1, "isend", 0)],
    }
    assert lines(logs) == []  # rank 1's recv #2 has its send: it completes
    assert lines(logs, {0: RankStatus("running"), 1: RankStatus("running")}) == []


def test_an_async_op_issued_but_not_waited_on_is_not_a_wait() -> None:
    logs = {0: [op(1, "irecv", 1, "issued")], 1: [op(1, "irecv", 0, "issued")]}
    assert lines(logs) == []
    logs[0] = [op(1, "irecv", 1, "started")]
    assert lines(logs, {0: waiting("x.py:8"), 1: waiting("x.py:40 in all_reduce")}) == [
        "hang: rank 0 waits in irecv from rank 1 (x.py:8); "
        "rank 1 never sent it: it is at x.py:40 in all_reduce"
    ]


def test_batch_isend_irecv_ops_pair_one_by_one() -> None:
    def batch(rank: int, state: str, sends: bool = True) -> list[Record]:
        """A pipeline step's batch: an isend to the other rank and an irecv from it."""
        ops = [op(1, "isend", 1 - rank, state)] if sends else []
        return [*ops, op(1, "irecv", 1 - rank, state)]

    assert lines({0: batch(0, "started"), 1: batch(1, "started")}) == []
    assert lines({0: batch(0, "completed"), 1: batch(1, "completed")}) == []
    assert lines({0: batch(0, "started", sends=False), 1: batch(1, "started", sends=False)}) == [
        "deadlock: rank 0 waits in irecv from rank 1 (x.py:8); rank 1 waits in irecv from rank 0 (x.py:8); "
        "no send is pending"
    ]


def test_pairs_count_per_group_and_tag() -> None:
    logs = {0: [op(1, "send", 1, tag=7)], 1: [op(1, "recv", 0, "issued", line=12)]}
    assert lines(logs, {0: waiting("x.py:20 in sleep")}) == [
        "hang: rank 1 waits in recv from rank 0 (x.py:12); rank 0 never sent it: it is at x.py:20 in sleep"
    ]
    logs = {0: [op(1, "send", 1, pg="1")], 1: [op(1, "recv", 0, "issued", pg="1")]}
    assert lines(logs) == []


def test_a_recv_from_any_rank() -> None:
    logs = {0: [op(0, "recv", None, "issued")], 1: [], 2: []}
    statuses = {1: RankStatus("paused at x.py:3"), 2: RankStatus("paused at x.py:3")}
    (verdict,) = p2p_verdicts(logs, statuses)
    assert str(verdict) == "hang: rank 0 waits in recv from any rank (x.py:8); no rank sent to it"
    assert verdict.suspects == frozenset({1, 2})
    logs[2] = [op(1, "isend", 0, "issued")]
    assert lines(logs, statuses) == []
    everyone = {r: [op(0, "recv", None, "issued")] for r in range(3)}
    assert [v.kind for v in p2p_verdicts(everyone)] == ["deadlock"]


def test_a_paused_rank_waits_in_nothing() -> None:
    logs = {0: [op(1, "recv", 1, "issued")], 1: [op(1, "recv", 0, "issued")]}
    assert lines(logs, {0: RankStatus("paused at x.py:8"), 1: RankStatus("paused at x.py:8")}) == []


def test_diagnose_tells_p2p_verdicts_after_the_collective_ones() -> None:
    barrier = Record(1, "barrier", state="issued", site=Frame("/job/x.py", 20, "main"))
    logs = {0: [barrier], 1: [op(1, "recv", 0, "issued", line=12)]}
    statuses = {0: waiting("x.py:20 in barrier"), 1: waiting("x.py:12 in recv")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 1 is missing from collective #1 barrier (x.py:20); "
        "rank 1 issued no collective and is at x.py:12 in recv",
        "hang: rank 1 waits in recv from rank 0 (x.py:12); rank 0 never sent it: it is at x.py:20 in barrier",
    ]
    assert [v.kind for v in diagnose(logs, statuses)] == ["hang", "hang"]


# -- the table ---------------------------------------------------------------------------------------


def test_table_has_a_row_per_transfer_with_both_sides() -> None:
    logs = {
        0: [op(1, "send", 1, line=9, t=1), op(1, "recv", 1, "issued", t=4)],
        1: [op(1, "recv", 0, line=12, t=2), op(2, "recv", 0, "issued", line=12, shape=(4,), t=3)],
    }
    assert p2p_table(logs, 10) == [
        "p2p",
        "  transfer  rank 0                                rank 1",
        "    0→1 #1  send → 1 [3] float32 x.py:9           recv ← 0 [3] float32 x.py:12",
        "    0→1 #2  -                                     recv ← 0 [4] float32 x.py:12 (issued)",
        "    1→0 #1  recv ← 1 [3] float32 x.py:8 (issued)  -",
    ]
    assert p2p_table(logs, 1) == [
        "p2p",
        "  transfer  rank 0",
        "    1→0 #1  recv ← 1 [3] float32 x.py:8 (issued)",
    ]


def test_table_marks_sides_that_differ_and_names_other_groups() -> None:
    logs = {
        0: [op(1, "isend", 1, pg="1", shape=(3,))],
        1: [op(1, "irecv", 0, pg="1", shape=(4,)), op(0, "irecv", None, "started", pg="1", tag=2)],
    }
    assert p2p_table(logs, 10) == [
        "p2p on group 1",
        "     transfer  rank 0                        rank 1",
        "≠      0→1 #1  isend → 1 [3] float32 x.py:8  irecv ← 0 [4] float32 x.py:8",
        "  any→1 tag 2  -                             irecv ← any [3] float32 x.py:8 (started)",
    ]


def test_collectives_table_ends_with_the_p2p_rows() -> None:
    reduce = Record(1, "all_reduce", shapes=((3,),), dtypes=("float32",))
    logs = {0: [reduce, op(1, "send", 1)], 1: [reduce, op(1, "recv", 0)]}
    assert collectives_table(logs, 5) == [
        "  seq  ranks 0-1",
        "   #1  all_reduce [3] float32",
        "p2p",
        "  transfer  rank 0                       rank 1",
        "    0→1 #1  send → 1 [3] float32 x.py:8  recv ← 0 [3] float32 x.py:8",
    ]


# -- the rank side, without torch ----------------------------------------------------------------------


class FakeTensor:
    """What the wrappers read of a tensor."""

    def __init__(self, *shape: int) -> None:
        self.shape = shape
        self.dtype = "torch.float32"


class FakeGroup:
    """What the wrappers read of a process group: its name, and its global ranks in group order."""

    def __init__(self, name: str, ranks: list[int]) -> None:
        self.group_name = name
        self.group_desc = "default_pg" if name == "0" else "undefined"
        self.ranks = ranks


class FakeWork:
    """An async op's work: done once waited on (or when a test says so)."""

    def __init__(self, source: int = -1) -> None:
        self.source = source
        self.completed = False
        self.seen: list[str] = []
        """The states of the records while `wait` ran."""

    def wait(self, timeout: object = None) -> bool:
        """Note the records' states, and be done."""
        self.seen = [record["state"] for record in p2p._log]
        self.completed = True
        return True

    def is_completed(self) -> bool:
        """True once waited on, or told so."""
        return self.completed

    def _source_rank(self) -> int:
        """The group rank that sent a recv from any rank."""
        return self.source


def fake_c10d() -> types.ModuleType:
    """A stand-in for distributed_c10d's point-to-point functions, with torch's signatures."""
    module = types.ModuleType(p2p.C10D)
    world = FakeGroup("0", [0, 1, 2, 3])

    def isend(
        tensor: FakeTensor, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None
    ) -> FakeWork:
        return FakeWork()

    def irecv(
        tensor: FakeTensor, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None
    ) -> FakeWork:
        return FakeWork(3 if src is None and group_src is None else -1)

    def send(
        tensor: FakeTensor, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None
    ) -> None:
        module.isend(tensor, dst, group, tag, group_dst).wait()  # as torch's send runs isend

    def recv(
        tensor: FakeTensor, src: int | None = None, group: Any = None, tag: int = 0, group_src: Any = None
    ) -> int:
        module.irecv(tensor, src, group, tag, group_src).wait()
        return 2 if src is None else src

    class P2POp:
        def __init__(self, op: Any, tensor: FakeTensor, peer: int, group: Any = None, tag: int = 0) -> None:
            self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group or world, tag

    def batch_isend_irecv(p2p_op_list: list[P2POp]) -> list[FakeWork]:
        works = []
        for item in p2p_op_list:
            key = "group_dst" if item.op is module.isend else "group_src"
            works.append(item.op(item.tensor, group=item.group, tag=item.tag, **{key: item.peer}))
        return works

    module.__dict__.update(
        isend=isend, irecv=irecv, send=send, recv=recv, P2POp=P2POp, batch_isend_irecv=batch_isend_irecv,
        Work=FakeWork, GroupMember=types.SimpleNamespace(WORLD=world),
        get_global_rank=lambda group, rank: group.ranks[rank], _get_default_group=lambda: world,
    )  # fmt: skip
    return module


@pytest.fixture
def wrapped(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The fake c10d, also as the package `torch.distributed`, with the p2p wrappers in; all undone after."""
    module = fake_c10d()
    package = types.ModuleType("torch.distributed")
    package.__dict__.update({name: getattr(module, name) for name in (*p2p.OPS, p2p.BATCH, "P2POp")})
    monkeypatch.setitem(sys.modules, p2p.C10D, module)
    monkeypatch.setitem(sys.modules, "torch.distributed", package)
    monkeypatch.delitem(sys.modules, flight_recorder.C10D_C, raising=False)
    original_wait = FakeWork.wait
    assert p2p.install()
    yield package
    p2p.uninstall()
    p2p.forget()
    assert FakeWork.wait is original_wait


def summary(log: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(seq, op, pg, peer, direction, tag, shapes, state) per record."""
    return [
        (e["seq"], e["op"], e["pg"], e["peer"], e["direction"], e["tag"], e["shapes"], e["state"])
        for e in log
    ]


def test_wrappers_record_peer_direction_and_a_count_per_channel(wrapped: types.ModuleType) -> None:
    sub = FakeGroup("1", [2, 3])
    wrapped.send(FakeTensor(3), 1)
    here = sys._getframe().f_lineno - 1
    wrapped.send(FakeTensor(3), dst=1)
    wrapped.send(FakeTensor(3), 2)
    wrapped.send(FakeTensor(3), 1, tag=4)
    wrapped.recv(FakeTensor(5), 1)
    wrapped.send(FakeTensor(2), group=sub, group_dst=1)
    log = p2p.p2p_log()
    assert summary(log) == [
        (1, "send", "0", 1, "send", 0, [[3]], "completed"),
        (2, "send", "0", 1, "send", 0, [[3]], "completed"),  # its inner isend is no second record
        (1, "send", "0", 2, "send", 0, [[3]], "completed"),
        (1, "send", "0", 1, "send", 4, [[3]], "completed"),
        (1, "recv", "0", 1, "recv", 0, [[5]], "completed"),
        (1, "send", "1", 3, "send", 0, [[2]], "completed"),  # group rank 1 of [2, 3] is global rank 3
    ]
    assert log[0]["site"] == [__file__, here, "test_wrappers_record_peer_direction_and_a_count_per_channel"]
    assert {(e["p2p"], e["source"], e["raw_op"] == e["op"]) for e in log} == {(True, "wrappers", True)}


def test_async_work_is_started_while_waited_on_then_completed(wrapped: types.ModuleType) -> None:
    work = wrapped.irecv(FakeTensor(3), src=1)
    assert p2p.p2p_log()[0]["state"] == "issued"
    work.wait()
    assert work.seen == ["started"]
    assert p2p.p2p_log()[0]["state"] == "completed"
    unwaited = wrapped.isend(FakeTensor(3), 1)
    unwaited.completed = True  # done without a wait: seen when the log is read
    assert p2p.p2p_log()[1]["state"] == "completed"
    FakeWork().wait()  # work no wrapper issued goes straight through


def test_a_recv_from_any_rank_learns_its_sender(wrapped: types.ModuleType) -> None:
    wrapped.recv(FakeTensor(3), 2)
    wrapped.recv(FakeTensor(3))  # returns 2: the second recv from rank 2
    work = wrapped.irecv(FakeTensor(3))
    assert summary(p2p.p2p_log())[-1][:5] == (0, "irecv", "0", None, "recv")
    work.wait()  # its work says rank 3 sent it
    assert [(e["seq"], e["peer"]) for e in p2p.p2p_log()] == [(1, 2), (2, 2), (1, 3)]


def test_batch_isend_irecv_records_each_op_completed_by_its_work(wrapped: types.ModuleType) -> None:
    ops = [
        wrapped.P2POp(wrapped.isend, FakeTensor(2, 8), 1),
        wrapped.P2POp(wrapped.irecv, FakeTensor(2, 8), 1),
    ]
    works = wrapped.batch_isend_irecv(ops)
    log = p2p.p2p_log()
    assert summary(log) == [
        (1, "isend", "0", 1, "send", 0, [[2, 8]], "issued"),
        (1, "irecv", "0", 1, "recv", 0, [[2, 8]], "issued"),
    ]
    assert {e["raw_op"] for e in log} == {"batch_isend_irecv"}
    works[1].wait()
    assert [e["state"] for e in p2p.p2p_log()] == ["issued", "completed"]


def test_the_package_holds_the_wrappers_and_they_come_off_again(wrapped: types.ModuleType) -> None:
    module = sys.modules[p2p.C10D]
    for name in (*p2p.OPS, p2p.BATCH):
        assert getattr(wrapped, name) is getattr(module, name)
        assert getattr(wrapped, name).__wrapped__ is not None
    p2p.uninstall()
    assert not hasattr(wrapped.isend, "__wrapped__")
    wrapped.isend(FakeTensor(3), 1).wait()
    assert p2p.p2p_log() == []


def test_collective_log_merges_p2p_records_with_the_flight_recorder_by_time(
    wrapped: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def entry(record_id: int, t: int, p2p_entry: bool = False) -> dict[str, Any]:
        """A retired Flight Recorder entry created at `t`."""
        return {
            "record_id": record_id, "collective_seq_id": record_id + 1, "profiling_name": "gloo:all_reduce",
            "process_group": ("0", "default_pg"), "retired": True, "time_created_ns": t, "is_p2p": p2p_entry,
        }  # fmt: skip

    entries = [entry(0, 10), entry(1, 15, p2p_entry=True), entry(2, 30)]
    monkeypatch.setattr(flight_recorder, "_fr_entries", lambda: [dict(e) for e in entries])
    wrapped.send(FakeTensor(3), 1)
    p2p._log[0]["time_ns"] = 20
    assert [(e["op"], e["source"]) for e in collectives.collective_log()] == [
        ("all_reduce", "flight_recorder"),
        ("send", "wrappers"),  # the recorder's own p2p entry gives way to ours
        ("all_reduce", "flight_recorder"),
    ]
    assert [e["op"] for e in collectives.collective_log(2)] == ["send", "all_reduce"]
    monkeypatch.setattr(flight_recorder, "_fr_entries", list)
    assert [e["op"] for e in collectives.collective_log()] == ["send"]  # nothing recorded: ours alone
