"""Verdicts and the side-by-side table from collective records, synthetic and captured from real gloo jobs."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddptui.core.commands.collectives_table import collectives_table
from ddptui.core.diagnosis.collective_records import Record, log_error, parse_log
from ddptui.core.diagnosis.collectives import RankStatus, diagnose, verdict_lines
from ddptui.core.model.fatal import read_death
from ddptui.core.model.state import RankState
from ddptui.core.model.topology import Topology
from ddptui.rank import collectives as rank_side
from ddptui.rank import flight_recorder, p2p
from ddptui.rank.protocol import Frame

FIXTURES = Path(__file__).parent / "fixtures"
TP_MESH = {"dims": ["dp", "tp"], "ranks": [[0, 1], [2, 3]]}
"""A 2x2 (dp, tp) device mesh as a rank describes it."""


def rec(
    seq: int,
    op: str = "all_reduce",
    shape: tuple[int, ...] | None = (3,),
    line: int = 10,
    state: str = "completed",
    dtype: str = "float32",
    pg: str = "0",
) -> Record:
    """A record of train.py:`line`; `shape=None` for an op without tensors (barrier)."""
    shapes = () if shape is None else (shape,)
    dtypes = () if shape is None else (dtype,)
    return Record(seq, op, pg, shapes, dtypes, state, Frame("/job/train.py", line, "main"))


def loop(count: int, line: int = 10) -> list[Record]:
    """`count` completed all_reduces of one call site."""
    return [rec(seq, line=line) for seq in range(1, count + 1)]


def waiting(where: str = "train.py:10 in all_reduce") -> RankStatus:
    """A rank the stall watch found idle at `where`."""
    return RankStatus(f"waiting at {where}")


def fixture(name: str) -> dict[int, list[Record]]:
    """Logs captured from a real gloo run of tests/scripts/fr_job.py (2 ranks), tp_mismatch.py or
    pair_skip.py (4 ranks), paths made neutral."""
    raw = json.loads((FIXTURES / f"fr_{name}.json").read_text())
    return {int(rank): parse_log(log) for rank, log in raw.items()}


# -- records ---------------------------------------------------------------------------------------


def test_records_parse_from_the_rank_side_json() -> None:
    item = {
        "seq": 3,
        "op": "all_reduce",
        "pg": "0",
        "shapes": [[2, 4]],
        "dtypes": ["float64"],
        "state": "issued",
        "site": ["/job/train.py", 12, "step"],
    }
    record = Record.from_json(item)
    assert record == Record(
        3, "all_reduce", "0", ((2, 4),), ("float64",), "issued", Frame("/job/train.py", 12, "step")
    )
    assert record.pending
    assert record.describe() == "all_reduce [2,4] float64 (train.py:12)"
    assert Record.from_json({"seq": 1, "op": "barrier", "site": None}).describe() == "barrier"


@pytest.mark.parametrize(
    "bad",
    [None, [], {"op": "all_reduce"}, {"seq": "1", "op": "x"}, {"seq": 1}, {"seq": 1, "op": "x", "site": [1]}],
)
def test_malformed_records_are_dropped(bad: object) -> None:
    with pytest.raises(ValueError):
        Record.from_json(bad)
    assert parse_log([bad, {"seq": 1, "op": "barrier"}]) == [Record(1, "barrier")]


def test_an_error_entry_is_reported_not_parsed() -> None:
    items = [{"error": "RuntimeError: boom"}]
    assert parse_log(items) == []
    assert log_error(items) == "RuntimeError: boom"
    assert log_error([{"seq": 1, "op": "barrier"}]) is None


def test_only_what_an_op_requires_equal_is_compared() -> None:
    root = Record(
        1, "scatter", shapes=((2, 3),), dtypes=("float32",), out_shapes=((3,),), out_dtypes=("float32",)
    )
    leaf = Record(1, "scatter", out_shapes=((3,),), out_dtypes=("float32",))
    assert root.signature() == leaf.signature()
    uneven = Record(1, "all_to_all_single", shapes=((4,),), dtypes=("float32",))
    assert (
        uneven.signature() == Record(1, "all_to_all_single", shapes=((6,),), dtypes=("float32",)).signature()
    )
    assert rec(1, shape=(3,)).signature() != rec(1, shape=(4,)).signature()
    assert rec(1, dtype="float32").signature() != rec(1, dtype="float64").signature()


def test_status_of_a_tracked_rank() -> None:
    where = Frame("/job/train.py", 11, "main")
    status = RankStatus.of(RankState().waiting(where, "sleep"))
    assert status == RankStatus("waiting at train.py:11 in sleep", where)
    assert status.now() == "is at train.py:11 in sleep"
    assert RankStatus.of(RankState().exited(0)).gone
    assert RankStatus("paused at train.py:3").now() == "is paused at train.py:3"


# -- verdicts ------------------------------------------------------------------------------------


def test_hang_names_the_missing_rank_and_where_it_is() -> None:
    logs = {0: [*loop(2), rec(3, state="issued")], 1: loop(2)}
    statuses = {0: waiting(), 1: waiting("train.py:11 in sleep")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 1 is missing from collective #3 all_reduce [3] float32 (train.py:10); "
        "rank 1 completed #2 and is at train.py:11 in sleep"
    ]
    (verdict,) = diagnose(logs, statuses)
    assert (verdict.kind, verdict.seq, verdict.suspects) == ("hang", 3, frozenset({1}))


def test_hang_groups_missing_ranks_that_stand_alike() -> None:
    logs = {r: [*loop(2), rec(3, state="issued")] for r in (0, 2)} | {r: loop(2) for r in (1, 3)}
    statuses = {
        0: waiting(),
        2: waiting(),
        1: RankStatus("paused at train.py:11"),
        3: RankStatus("paused at train.py:11"),
    }
    assert verdict_lines(logs, statuses) == [
        "hang: ranks 1,3 are missing from collective #3 all_reduce [3] float32 (train.py:10); "
        "ranks 1,3 completed #2 and are paused at train.py:11"
    ]


def test_deadlock_same_seq_different_ops() -> None:
    logs = {r: [*loop(4), rec(5, state="issued", line=7)] for r in (0, 2, 3)}
    logs[1] = [*loop(4), rec(5, "barrier", None, line=16, state="issued")]
    statuses = {r: waiting() for r in range(4)}
    assert verdict_lines(logs, statuses) == [
        "deadlock: ranks 0,2-3 wait in #5 all_reduce (train.py:7); rank 1 waits in #5 barrier (train.py:16)"
    ]
    assert diagnose(logs, statuses)[0].suspects == frozenset({1})
    # before the stall watch calls them waiting, the ranks still in those ops make no verdict yet:
    # said then, a mismatch would come before the deadlock it is part of
    running = {r: RankStatus("running") for r in range(4)}
    assert verdict_lines(logs, running) == []
    logs[1][-1] = rec(5, "barrier", None, line=16, state="failed")  # once out of it, it is a mismatch
    assert [line.split(":")[0] for line in verdict_lines(logs, running)] == ["mismatch"]


def test_mismatch_of_shapes() -> None:
    logs = {0: [rec(1, line=8)], 1: [rec(1, shape=(4,), line=8)]}
    assert verdict_lines(
        logs, {0: RankStatus("paused at train.py:9"), 1: RankStatus("paused at train.py:9")}
    ) == [
        "mismatch: collective #1 all_reduce differs: rank 0 [3] float32 (train.py:8), "
        "rank 1 [4] float32 (train.py:8)"
    ]


def test_mismatch_shows_the_first_difference_only() -> None:
    logs = {r: [*loop(5), rec(6, dtype="float64"), rec(7, shape=(9,))] for r in (0, 1, 2)}
    logs[1] = [*loop(5), rec(6), rec(7)]
    lines = verdict_lines(logs)
    assert lines == [
        "mismatch: collective #6 all_reduce differs: "
        "ranks 0,2 [3] float64 (train.py:10), rank 1 [3] float32 (train.py:10)"
    ]


def test_skip_seen_where_an_op_differs_is_a_skip_not_a_mismatch() -> None:
    # rank 1 skipped one of three loop all_reduces; its barrier then paired with rank 0's third one
    logs = {
        0: [*loop(3), rec(4, "barrier", None, line=12, state="issued")],
        1: [*loop(2), rec(3, "barrier", None, line=12)],
    }
    statuses = {0: waiting("train.py:12 in barrier"), 1: RankStatus("exited 0")}
    assert verdict_lines(logs, statuses) == [
        "early exit: rank 1 exited 0 after #3, but rank 0 waits in collective #4 barrier (train.py:12)",
        "skip: rank 1 skipped collective #3 all_reduce [3] float32 (train.py:10) that rank 0 issued; "
        "from there its #n pairs with rank 0's #n+1",
    ]


def test_skip_with_equal_shapes_is_told_by_call_sites() -> None:
    logs = {0: [*loop(3), rec(4, line=12, state="issued")], 1: [*loop(2), rec(3, line=12)]}
    statuses = {0: waiting("train.py:12 in all_reduce"), 1: waiting("train.py:14 in sleep")}
    lines = verdict_lines(logs, statuses)
    assert lines[0].startswith(
        "hang: rank 1 is missing from collective #4 all_reduce [3] float32 (train.py:12)"
    )
    assert lines[1].startswith("skip: rank 1 skipped collective #3 all_reduce [3] float32 (train.py:10)")
    assert not any(line.startswith("mismatch") for line in lines)


def test_an_extra_collective_on_one_rank() -> None:
    # rank 2's extra all_reduce (line 15) paired with the others' last one (line 21); it now waits alone
    logs = {r: [*loop(3), rec(4, line=21)] for r in (0, 1)}
    logs[2] = [*loop(3), rec(4, line=15), rec(5, line=21, state="issued")]
    statuses = {0: RankStatus("exited 0"), 1: RankStatus("exited 0"), 2: waiting("train.py:21 in all_reduce")}
    assert verdict_lines(logs, statuses) == [
        "early exit: ranks 0-1 exited 0 after #4, "
        "but rank 2 waits in collective #5 all_reduce [3] float32 (train.py:21)",
        "skip: rank 2 issued an extra collective #4 all_reduce [3] float32 (train.py:15) "
        "that rank 0 did not; "
        "from there its #n pairs with rank 0's #n-1",
    ]


def test_legitimately_different_call_sites_are_no_alarm() -> None:
    # `if rank == 0: broadcast(x) else: broadcast(y)`: same op and shape, two lines
    logs = {0: [rec(1, "broadcast", line=5), rec(2)], 1: [rec(1, "broadcast", line=7), rec(2)]}
    assert diagnose(logs, {0: waiting(), 1: waiting()}) == []


def test_a_thousand_matched_collectives_raise_nothing_and_are_quick() -> None:
    logs = {r: [rec(s, line=10 + s % 3, shape=(s % 5 + 1,)) for s in range(1, 1001)] for r in range(8)}
    start = time.perf_counter()
    assert diagnose(logs, {r: RankStatus("paused at train.py:3") for r in range(8)}) == []
    assert time.perf_counter() - start < 1.0


def test_ring_windows_that_start_at_different_seqs() -> None:
    # each rank's ring holds its own last 2000 entries; only seqs both hold are compared
    logs = {0: [rec(s) for s in range(101, 2101)], 1: [rec(s) for s in range(90, 2090)]}
    assert (
        diagnose(logs, {0: RankStatus("paused at train.py:3"), 1: RankStatus("paused at train.py:3")}) == []
    )
    logs[0][-1] = rec(2100, state="issued")
    (verdict,) = diagnose(logs, {0: waiting(), 1: waiting("train.py:30 in sleep")})
    assert verdict.kind == "hang" and verdict.seq == 2100 and "completed #2089" in verdict.text


def test_retirement_lag_on_a_paused_or_running_rank_is_no_hang() -> None:
    # the recorder marks completion on gloo's worker thread a moment after the call returns
    logs = {0: [*loop(2), rec(3, state="issued")], 1: loop(2)}
    assert diagnose(logs, {0: RankStatus("paused at train.py:11"), 1: RankStatus("running")}) == []
    assert diagnose(logs, {0: RankStatus("running"), 1: RankStatus("running")}) == []


def test_without_statuses_a_pending_last_collective_counts_as_waiting() -> None:
    logs = {0: [*loop(2), rec(3, state="issued")], 1: loop(2)}
    assert verdict_lines(logs) == [
        "hang: rank 1 is missing from collective #3 all_reduce [3] float32 (train.py:10); rank 1 completed #2"
    ]


def test_early_exit_while_the_peer_crashed_in_the_collective() -> None:
    # gloo fails a pending collective when a peer's connections close; the recorder retires it
    logs = {0: loop(3), 1: loop(2)}
    statuses = {
        0: RankStatus("crashed RuntimeError: Connection closed by peer (train.py:10), in post-mortem"),
        1: RankStatus("exited 0"),
    }
    (verdict,) = diagnose(logs, statuses)
    assert (
        str(verdict) == "early exit: rank 1 exited 0 after #2, "
        "but rank 0 crashed in collective #3 all_reduce [3] float32 (train.py:10)"
    )
    assert verdict.suspects == frozenset({1})


def test_early_exit_of_a_rank_whose_log_was_never_taken() -> None:
    logs = {0: [*loop(2), rec(3, state="issued")], 2: [*loop(2), rec(3, state="issued")]}
    statuses = {0: waiting(), 1: RankStatus("exited 0"), 2: waiting()}
    assert verdict_lines(logs, statuses) == [
        "early exit: rank 1 exited 0, "
        "but ranks 0,2 wait in collective #3 all_reduce [3] float32 (train.py:10)"
    ]


def test_a_crashed_rank_after_its_collectives_is_missing_from_the_next() -> None:
    logs = {0: [*loop(2), rec(3, state="issued")], 1: [*loop(2), rec(3, state="issued")], 2: loop(2)}
    crashed = RankStatus("crashed NameError: name 'c' is not defined (train.py:12), in post-mortem")
    lines = verdict_lines(logs, {0: waiting(), 1: waiting(), 2: crashed})
    assert lines == [
        "hang: rank 2 is missing from collective #3 all_reduce [3] float32 (train.py:10); "
        "rank 2 completed #2 and crashed NameError: name 'c' is not defined (train.py:12), in post-mortem"
    ]


def test_subgroups_are_paired_on_their_own() -> None:
    logs = {
        0: [*loop(2), rec(1, pg="1"), rec(2, pg="1", state="issued")],
        1: [*loop(2), rec(1, pg="1")],
        2: loop(2),
    }
    statuses = {0: waiting(), 1: RankStatus("paused at train.py:40"), 2: RankStatus("paused at train.py:40")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 1 is missing from group 1 #2 all_reduce [3] float32 (train.py:10); "
        "rank 1 completed group 1 #1 and is paused at train.py:40"
    ]


def test_groups_are_named_in_the_users_words_once_the_topology_is_known() -> None:
    logs = {r: [rec(1)] for r in range(4)}
    logs[0] += [rec(1, pg="1"), rec(2, pg="1", state="issued")]
    logs[1] += [rec(1, pg="1")]
    statuses = {0: waiting()} | {r: RankStatus("paused at train.py:40") for r in (1, 2, 3)}
    topology = Topology.from_answers(
        [{"groups": [{"name": "1", "desc": "mesh_tp", "ranks": [0, 1]}], "meshes": [TP_MESH]}]
    )
    assert verdict_lines(logs, statuses, topology) == [
        "hang: rank 1 is missing from tp group [0,1] (dp=0) #2 all_reduce [3] float32 (train.py:10); "
        "rank 1 completed tp group [0,1] (dp=0) #1 and is paused at train.py:40"
    ]


def test_a_crashed_rank_crashed_in_its_last_collective_of_all_groups() -> None:
    # rank 1 went on from WORLD #1 to its subgroup's #1 and crashed there: not in WORLD #1
    logs = {0: [rec(1), rec(2, state="issued")], 1: [rec(1), rec(1, pg="1")]}
    crashed = RankStatus("crashed RuntimeError: Connection reset by peer (train.py:13), in post-mortem")
    statuses = {0: waiting(), 1: crashed, 2: RankStatus("killed by SIGABRT")}
    assert [(v.kind, v.pg, v.seq, v.suspects) for v in diagnose(logs, statuses)] == [
        ("hang", "0", 2, frozenset({1, 2}))
    ]


def test_point_to_point_records_are_not_paired_by_seq() -> None:
    send = Record(1, "send", p2p=True, shapes=((4,),), dtypes=("float32",), state="issued")
    logs = {0: [*loop(2), send], 1: loop(2)}
    assert diagnose(logs, {0: waiting("train.py:5 in send"), 1: waiting("train.py:6 in sleep")}) == []


# -- verdicts on logs captured from real gloo jobs -------------------------------------------------


def test_captured_hang() -> None:
    logs = fixture("hang")
    statuses = {0: waiting("fr_job.py:69 in all_reduce"), 1: waiting("fr_job.py:68 in sleep")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 1 is missing from collective #3 all_reduce [3] float32 (fr_job.py:69); "
        "rank 1 completed #2 and is at fr_job.py:68 in sleep"
    ]


def test_captured_skip() -> None:
    logs = fixture("skip")
    statuses = {0: waiting("fr_job.py:79 in all_reduce"), 1: waiting("fr_job.py:80 in sleep")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 1 is missing from collective #4 all_reduce [3] float32 (fr_job.py:79); "
        "rank 1 completed #3 and is at fr_job.py:80 in sleep",
        "skip: rank 1 skipped collective #3 all_reduce [3] float32 (fr_job.py:77) that rank 0 issued; "
        "from there its #n pairs with rank 0's #n+1",
    ]


def test_captured_mismatch() -> None:
    logs = fixture("mismatch")
    statuses = {0: RankStatus("running"), 1: RankStatus("crashed RuntimeError: Connection closed by peer")}
    assert verdict_lines(logs, statuses) == [
        "mismatch: collective #1 all_reduce differs: rank 0 [3] float32 (fr_job.py:87), "
        "rank 1 [4] float32 (fr_job.py:87)"
    ]


def test_captured_early_exit() -> None:
    logs = fixture("exits")
    statuses = {
        0: RankStatus("crashed RuntimeError: Connection closed by peer (fr_job.py:103)"),
        1: RankStatus("exited 0"),
    }
    assert verdict_lines(logs, statuses) == [
        "early exit: rank 1 exited 0 after #2, "
        "but rank 0 crashed in collective #3 all_reduce [3] float32 (fr_job.py:103)"
    ]


def test_captured_deadlock() -> None:
    logs = fixture("deadlock")
    statuses = {0: waiting("fr_job.py:114 in all_reduce"), 1: waiting("fr_job.py:116 in barrier")}
    assert verdict_lines(logs, statuses) == [
        "deadlock: rank 0 waits in #2 all_reduce (fr_job.py:114); rank 1 waits in #2 barrier (fr_job.py:116)"
    ]


def test_captured_ddp_steps_match() -> None:
    logs = fixture("ddp")
    assert diagnose(logs, {0: RankStatus("exited 0"), 1: RankStatus("exited 0")}) == []
    backward = [r for r in logs[0] if r.op == "all_reduce"]
    assert [r.site.line for r in backward if r.site] == [130, 130]


def mesh_topology() -> Topology:
    """The groups of a 2x2 (dp, tp) mesh made by `init_device_mesh` after `init_process_group`, as
    the ranks would describe them: WORLD is 0, the dp groups 1-2, the tp groups 3-4."""
    groups = [{"name": "0", "desc": "default_pg", "ranks": [0, 1, 2, 3]}]
    groups += [{"name": str(1 + tp), "desc": "mesh_dp", "ranks": [tp, 2 + tp]} for tp in (0, 1)]
    groups += [{"name": str(3 + dp), "desc": "mesh_tp", "ranks": [2 * dp, 2 * dp + 1]} for dp in (0, 1)]
    return Topology.from_answers([{"groups": groups, "meshes": [TP_MESH]}])


def tp_mismatch_statuses() -> dict[int, RankStatus]:
    """The ranks of tests/scripts/tp_mismatch.py once gloo aborted rank 2 (its terminal captured)."""
    death = read_death((FIXTURES / "gloo_abort_rank2.log").read_bytes())
    reset = "RuntimeError: [pair.cc:537] Read error: Connection reset by peer"
    closed = "RuntimeError: [pair.cc:553] Connection closed by peer"
    return {
        0: waiting("tp_mismatch.py:14 in barrier"),
        1: RankStatus(f"crashed {closed} (tp_mismatch.py:14), in post-mortem"),
        2: RankStatus("killed by SIGABRT", death=death),
        3: RankStatus(f"crashed {reset} (tp_mismatch.py:13), in post-mortem"),
    }


ABORTED = "gloo aborted rank 2 there (Received data size doesn't match expected size)"


def test_captured_gloo_abort_is_a_mismatch_of_the_rank_that_passed_the_odd_shape() -> None:
    # rank 2's log was never read: it ran for seconds and died without a prompt
    logs, statuses = fixture("tp_mismatch"), tp_mismatch_statuses()
    first = diagnose(logs, statuses, mesh_topology())[0]
    assert first.text == (
        f"tp group [2,3] (dp=1) #2 all_reduce at tp_mismatch.py:13: rank 3 passed [5] float32; {ABORTED}"
    )
    assert (first.kind, first.pg, first.seq, first.suspects, first.victims) == (
        "mismatch",
        "4",
        2,
        frozenset({3}),
        frozenset({2}),
    )
    # without the topology the group is found by its ranks that did not get past that line
    assert diagnose(logs, statuses)[0].text.startswith("group 4 #2 all_reduce at tp_mismatch.py:13: rank 3")


def test_a_gloo_abort_with_the_aborted_ranks_log_known() -> None:
    logs, statuses = fixture("tp_mismatch"), tp_mismatch_statuses()
    logs[2] = [*logs[3][:2], dataclasses.replace(logs[3][2], shapes=((4,),), state="issued")]
    verdicts = diagnose(logs, statuses, mesh_topology())
    assert verdicts[0].text == (
        "tp group [2,3] (dp=1) #2 all_reduce at tp_mismatch.py:13: "
        f"rank 3 passed [5] float32, rank 2 [4] float32; {ABORTED}"
    )
    assert [v.kind for v in verdicts].count("mismatch") == 1  # not again as the group's own mismatch


def test_a_gloo_abort_where_the_peers_agree_blames_the_aborted_rank() -> None:
    death = read_death((FIXTURES / "gloo_abort_rank2.log").read_bytes())
    at = Frame("/job/tp_mismatch.py", 13, "<module>")
    logs = {r: [Record(1, "all_reduce", "0", ((4,),), ("float32",), "completed", at)] for r in (0, 1, 3)}
    (verdict,) = diagnose(logs, {2: RankStatus("killed by SIGABRT", death=death)})
    assert verdict.text == (
        "collective #1 all_reduce at tp_mismatch.py:13: ranks 0-1,3 passed [4] float32 and rank 2 "
        f"something else; {ABORTED}"
    )
    assert (verdict.suspects, verdict.victims) == (frozenset({2}), frozenset())


def test_captured_gloo_abort_leads_the_waits_it_causes() -> None:
    (verdict,) = diagnose(fixture("tp_mismatch"), tp_mismatch_statuses(), mesh_topology())
    assert str(verdict) == (
        "mismatch: tp group [2,3] (dp=1) #2 all_reduce at tp_mismatch.py:13: rank 3 passed [5] float32; "
        f"{ABORTED} → rank 0 waits in WORLD #2 barrier (tp_mismatch.py:14) for ranks 2-3; "
        "rank 1 crashed there"
    )
    (hang,) = verdict.consequences
    assert (hang.kind, hang.pg, hang.seq, hang.suspects) == ("hang", "0", 2, frozenset({2, 3}))
    assert str(verdict.follow_up(hang)) == (
        "hang: rank 0 waits in WORLD #2 barrier (tp_mismatch.py:14) for ranks 2-3; rank 1 crashed there, "
        "a consequence of the mismatch in tp group [2,3] (dp=1) #2 all_reduce at tp_mismatch.py:13"
    )


PAIRS = Topology.from_answers(
    [{"groups": [{"name": "1", "desc": "", "ranks": [0, 1]}, {"name": "2", "desc": "", "ranks": [2, 3]}]}]
)
"""The groups of tests/scripts/pair_skip.py: pairs [0,1] and [2,3] made by new_group."""


def test_captured_skip_in_a_pair_leads_the_wait_it_causes_in_world() -> None:
    # rank 3 skipped its pair's second all_reduce: rank 2 waits in it, the others in WORLD's barrier
    statuses = {r: waiting("pair_skip.py:12 in barrier") for r in (0, 1, 3)} | {
        2: waiting("pair_skip.py:11 in all_reduce")
    }
    (verdict,) = diagnose(fixture("pair_skip"), statuses, PAIRS)
    assert str(verdict) == (
        "hang: rank 3 skipped group [2,3] #2 all_reduce [2] float32 (pair_skip.py:11) → rank 2 waits there"
        " → ranks 0-1,3 wait in WORLD #1 barrier (pair_skip.py:12) for rank 2"
    )
    assert (verdict.pg, verdict.seq, verdict.suspects) == ("2", 2, frozenset({3}))
    assert [(v.pg, v.seq, v.suspects) for v in verdict.consequences] == [("0", 1, frozenset({2}))]
    # ranks not yet found waiting: the skip is told from the logs, the waits from those known
    statuses |= {1: RankStatus("running"), 3: RankStatus("running")}
    assert verdict_lines(fixture("pair_skip"), statuses) == [
        "hang: rank 3 skipped group 2 #2 all_reduce [2] float32 (pair_skip.py:11) → rank 2 waits there"
        " → rank 0 waits in WORLD #1 barrier (pair_skip.py:12) for rank 2"
    ]


def test_a_member_that_issued_nothing_in_its_group_is_missing_once_the_topology_says_it_is_one() -> None:
    # rank 3 skipped its pair's first all_reduce: without the topology, group 2 is rank 2's alone
    at = Frame("/job/pair_skip.py", 12, "<module>")
    barrier = Record(1, "barrier", state="issued", site=at, pg_desc="default_pg")
    pair = [
        Record(1, "all_reduce", pg, ((2,),), ("float32",), site=Frame("/job/pair_skip.py", 9, ""))
        for pg in "12"
    ]
    logs = {
        0: [pair[0], barrier],
        1: [pair[0], barrier],
        2: [dataclasses.replace(pair[1], state="issued")],
        3: [barrier],
    }
    statuses = {r: waiting("pair_skip.py:12 in barrier") for r in (0, 1, 3)} | {2: waiting("pair_skip.py:9")}
    assert verdict_lines(logs, statuses) == [
        "hang: rank 2 is missing from WORLD #1 barrier (pair_skip.py:12); "
        "rank 2 issued no collective in WORLD and is at pair_skip.py:9"
    ]
    assert verdict_lines(logs, statuses, PAIRS) == [
        "hang: rank 3 skipped group [2,3] #1 all_reduce [2] float32 (pair_skip.py:9) → rank 2 waits there"
        " → ranks 0-1,3 wait in WORLD #1 barrier (pair_skip.py:12) for rank 2"
    ]


def test_groups_waiting_on_each_other_without_a_skip_are_one_deadlock() -> None:
    # after one round of both, rank 0 calls its pair's all_reduce then the barrier; rank 1 the other way
    both = [rec(1, line=20), rec(1, pg="1", line=21)]
    logs = {
        0: [*both, rec(2, pg="1", line=21, state="issued")],
        1: [*both, rec(2, "barrier", None, line=22, state="issued")],
    }
    (verdict,) = diagnose(logs, {0: waiting(), 1: waiting("train.py:22 in barrier")})
    assert str(verdict) == (
        "deadlock: rank 1 waits in WORLD #2 barrier (train.py:22) for rank 0"
        " → rank 0 waits in group 1 #2 all_reduce (train.py:21) for rank 1"
    )
    assert verdict.suspects == frozenset({0, 1})


# -- the table -----------------------------------------------------------------------------------


def test_table_aligns_by_seq_and_marks_differences() -> None:
    logs = {
        0: [*loop(3), rec(4, "barrier", None, line=12, state="issued")],
        1: [*loop(2), rec(3, "barrier", None, line=12)],
        2: [*loop(3), rec(4, "barrier", None, line=12, state="issued")],
    }
    assert collectives_table(logs, 3) == [
        "  seq  ranks 0,2                           rank 1",
        "   #2  all_reduce [3] float32 train.py:10  all_reduce [3] float32 train.py:10",
        "≠  #3  all_reduce [3] float32 train.py:10  barrier train.py:12",
        "   #4  barrier train.py:12 (issued)        -",
    ]


def test_table_per_group_and_long_cells_cut() -> None:
    wide = Record(1, "all_gather", shapes=((1024, 1024, 3),) * 4, dtypes=("bfloat16",), site=None)
    logs = {0: [wide, rec(1, pg="1")], 1: [wide]}
    lines = collectives_table(logs, 5)
    assert lines[0] == "WORLD"
    assert lines[1:3] == ["  seq  ranks 0-1", "   #1  all_gather [1024,1024,3],[1024,1024,3],[102…"]
    assert lines[3:] == ["group 1", "  seq  rank 0", "   #1  all_reduce [3] float32 train.py:10"]
    assert collectives_table(logs, 0) == ["WORLD", "  seq  ranks 0-1", "group 1", "  seq  rank 0"]
    pair = Topology.from_answers([{"groups": [{"name": "1", "desc": "", "ranks": [0, 1]}]}])
    assert collectives_table(logs, 0, pair) == ["WORLD", "  seq  ranks 0-1", "group [0,1]", "  seq  rank 0"]
    tp = Topology.from_answers(
        [{"groups": [{"name": "1", "desc": "mesh_tp", "ranks": [0, 1]}], "meshes": [TP_MESH]}]
    )
    assert collectives_table(logs, 0, tp)[2] == "tp group [0,1] (dp=0)"


# -- the rank side, without torch ------------------------------------------------------------------

RAW_ENTRY = {  # one entry of torch 2.13's pickled Flight Recorder dump on gloo, with its stack
    "frames": [
        {
            "name": "all_reduce",
            "filename": "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
            "line": 3245,
        },
        {
            "name": "wrapper",
            "filename": "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py",
            "line": 83,
        },
        {"name": "main", "filename": "/job/train.py", "line": 9},
        {"name": "<module>", "filename": "/job/train.py", "line": 26},
    ],
    "record_id": 0,
    "pg_id": 0,
    "process_group": ("0", "default_pg"),
    "collective_seq_id": 1,
    "p2p_seq_id": 0,
    "op_id": 1,
    "profiling_name": "gloo:all_reduce",
    "input_sizes": [[3]],
    "input_dtypes": ["Float"],
    "output_sizes": [[3]],
    "output_dtypes": ["Float"],
    "state": "scheduled",
    "retired": False,
    "is_p2p": False,
}


def test_a_flight_recorder_entry_becomes_a_record() -> None:
    record = flight_recorder._fr_record(RAW_ENTRY)
    assert record == {
        "seq": 1,
        "op": "all_reduce",
        "raw_op": "gloo:all_reduce",
        "pg": "0",
        "pg_desc": "default_pg",
        "shapes": [[3]],
        "dtypes": ["float32"],
        "out_shapes": [[3]],
        "out_dtypes": ["float32"],
        "state": "issued",
        "p2p": False,
        "site": ["/job/train.py", 9, "main"],
        "source": "flight_recorder",
    }
    assert json.loads(json.dumps(record)) == record
    assert Record.from_json(record).describe() == "all_reduce [3] float32 (train.py:9)"
    assert flight_recorder._fr_record(dict(RAW_ENTRY, retired=True))["state"] == "completed"


def test_without_torch_distributed_there_is_nothing_to_report(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, rank_side.C10D, raising=False)
    assert rank_side.collective_log() == []


class FakeTensor:
    """What the wrappers read of a tensor."""

    def __init__(self, *shape: int) -> None:
        self.shape = shape
        self.dtype = "torch.float32"


class FakeGroup:
    """What the wrappers read of a process group."""

    def __init__(self, name: str) -> None:
        self.group_name = name
        self.group_desc = "default_pg" if name == "0" else "undefined"


def fake_c10d() -> types.ModuleType:
    """A stand-in for torch.distributed.distributed_c10d with torch's signatures."""
    module = types.ModuleType(rank_side.C10D)
    world = FakeGroup("0")

    def all_reduce(
        tensor: FakeTensor, op: object = None, group: object = None, async_op: bool = False
    ) -> None:
        if tensor.shape == (13,):
            raise RuntimeError("Connection closed by peer")

    def isend(tensor: FakeTensor, dst: int | None = None, group: object = None, tag: int = 0) -> None:
        return None

    def send(tensor: FakeTensor, dst: int | None = None, group: object = None, tag: int = 0) -> None:
        module.isend(tensor, dst, group, tag)  # torch 2.13's send runs isend

    def barrier(group: object = None, async_op: bool = False, device_ids: object = None) -> None:
        return None

    module.__dict__.update(all_reduce=all_reduce, isend=isend, send=send, barrier=barrier)
    module.__dict__["_get_default_group"] = lambda: world
    return module


@pytest.fixture
def wrapped(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The fake c10d with the wrappers installed; everything undone after."""
    module = fake_c10d()
    monkeypatch.setitem(sys.modules, rank_side.C10D, module)
    monkeypatch.delitem(sys.modules, flight_recorder.C10D_C, raising=False)
    monkeypatch.delitem(sys.modules, "torch.distributed", raising=False)
    assert rank_side.install_wrappers()
    yield module
    rank_side.uninstall_wrappers()
    rank_side._log.clear()
    rank_side._counters.clear()
    p2p.forget()


def test_wrappers_record_seq_shapes_sites_and_states(wrapped: types.ModuleType) -> None:
    wrapped.all_reduce(FakeTensor(3))
    here = sys._getframe().f_lineno - 1
    wrapped.all_reduce(FakeTensor(2, 2), group=FakeGroup("1"))
    wrapped.barrier()
    with pytest.raises(RuntimeError):
        wrapped.all_reduce(FakeTensor(13))
    wrapped.send(FakeTensor(4), 1)
    log = rank_side.collective_log()
    assert [(e["seq"], e["op"], e["pg"], e["shapes"], e["dtypes"], e["state"], e["p2p"]) for e in log] == [
        (1, "all_reduce", "0", [[3]], ["float32"], "completed", False),
        (1, "all_reduce", "1", [[2, 2]], ["float32"], "completed", False),
        (2, "barrier", "0", [], [], "completed", False),
        (3, "all_reduce", "0", [[13]], ["float32"], "failed", False),
        (1, "send", "0", [[4]], ["float32"], "completed", True),  # one record: its inner isend is not another
    ]
    assert log[0]["site"] == [__file__, here, "test_wrappers_record_seq_shapes_sites_and_states"]
    assert rank_side.collective_log(2) == log[-2:]
    assert rank_side.collective_log(0) == []


def test_wrappers_come_off_again(wrapped: types.ModuleType) -> None:
    wrapper = wrapped.all_reduce
    rank_side.uninstall_wrappers()
    assert wrapped.all_reduce is wrapper.__wrapped__
    wrapped.all_reduce(FakeTensor(3))
    assert rank_side.collective_log() == []
