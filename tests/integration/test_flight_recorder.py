"""collective_log() inside real 2-rank gloo jobs, from torch's Flight Recorder and from the wrappers,
and the verdicts the core draws from what the ranks report.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPTS, wait_for

from ddptui.core.diagnosis.collective_records import Record, parse_log
from ddptui.core.diagnosis.collectives import RankStatus, verdict_lines
from ddptui.rank.protocol import Frame

SCRIPT = SCRIPTS / "fr_job.py"
SOURCE = SCRIPT.read_text().splitlines()
JOB_TIMEOUT = 60.0
"""Two torch ranks start in 5 s on a quiet machine; a full run alongside another took over 20."""

pytestmark = pytest.mark.timeout(150)


def line(marker: str) -> int:
    """The line of fr_job.py marked `# @marker`."""
    (number,) = [n for n, text in enumerate(SOURCE, 1) if text.rstrip().endswith(f"# @{marker}")]
    return number


def at(marker: str) -> str:
    """`fr_job.py:69` as verdicts show the marked line."""
    return str(Frame(str(SCRIPT), line(marker)))


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_job(out: Path, scenario: str, wrappers: bool = False) -> dict[int, dict[str, Any]]:
    """Run both ranks of a scenario until each wrote its log; whatever still runs is then killed."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    env.update(OMP_NUM_THREADS="1", FR_OUT=str(out), PYTHONUNBUFFERED="1")
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    if wrappers:
        env.update(TORCH_FR_BUFFER_SIZE="0")
    outputs = [(out / f"out{rank}.txt").open("w") for rank in (0, 1)]
    ranks = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), scenario],
            env=dict(env, RANK=str(rank)),
            stdout=outputs[rank],
            stderr=subprocess.STDOUT,
        )
        for rank in (0, 1)
    ]
    try:
        written = wait_for(lambda: all((out / f"rank{r}.json").exists() for r in (0, 1)), JOB_TIMEOUT)
        outputs_text = "\n".join((out / f"out{r}.txt").read_text() for r in (0, 1))
        assert written, f"no log from a rank:\n{outputs_text}"
        return {r: json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)}
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
        for rank in ranks:
            rank.wait(10)
        for output in outputs:
            output.close()


def records(job: dict[int, dict[str, Any]]) -> dict[int, list[Record]]:
    """Each rank's log as the core parses it."""
    return {rank: parse_log(body["log"]) for rank, body in job.items()}


def summary(log: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(seq, op, shapes, dtypes, state, call site line) per entry."""
    return [(e["seq"], e["op"], e["shapes"], e["dtypes"], e["state"], e["site"][1]) for e in log]


PLAIN = [
    (1, "all_reduce", [[3]], ["float32"], "completed", line("ar3")),
    (2, "all_reduce", [[2, 4]], ["float64"], "completed", line("ar24")),
    (3, "broadcast", [[5]], ["int64"], "completed", line("bcast")),
    (4, "barrier", [], [], "completed", line("barrier")),
    (5, "all_reduce", [[7]], ["float32"], "completed", line("nested")),
]


def test_flight_recorder_log_of_plain_collectives(tmp_path: Path) -> None:
    job = run_job(tmp_path, "basic")
    for rank in (0, 1):
        log = job[rank]["log"]
        assert summary(log) == PLAIN
        assert {(e["source"], e["pg"], e["raw_op"].split(":")[0]) for e in log} == {
            ("flight_recorder", "0", "gloo")
        }
        assert log[-1]["site"] == [str(SCRIPT), line("nested"), "reduce"]
        assert job[rank]["pg_seq"] == 5  # the group's own counter agrees with the recorder's numbering
        assert job[rank]["tail"] == log[-2:]
    assert verdict_lines(records(job)) == []


def test_flight_recorder_taken_while_blocked_names_the_hang(tmp_path: Path) -> None:
    job = run_job(tmp_path, "hang")
    assert summary(job[0]["log"])[-1] == (3, "all_reduce", [[3]], ["float32"], "issued", line("hang"))
    assert [e["seq"] for e in job[1]["log"]] == [1, 2]
    statuses = {
        0: RankStatus(f"waiting at {at('hang')} in all_reduce"),
        1: RankStatus(f"waiting at {at('hang_sleep')} in sleep"),
    }
    assert verdict_lines(records(job), statuses) == [
        f"hang: rank 1 is missing from collective #3 all_reduce [3] float32 ({at('hang')}); "
        f"rank 1 completed #2 and is at {at('hang_sleep')} in sleep"
    ]
    # torch's own analyzer agrees, on the dumps write_fr_trace() repaired for it
    assert job[0]["trace_error"] is None and job[1]["trace_error"] is None
    analyzer = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(tmp_path / "traces")]
    report = subprocess.run(analyzer, capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert "missing ranks: {1}" in report.stdout + report.stderr  # it logs to stderr


@pytest.mark.parametrize("wrappers", [False, True], ids=["flight_recorder", "wrappers"])
def test_skipped_all_reduce_is_told_as_a_hang_and_a_skip(tmp_path: Path, wrappers: bool) -> None:
    job = run_job(tmp_path, "skip", wrappers)
    assert [(e["seq"], e["site"][1], e["state"]) for e in job[1]["log"]] == [
        (1, line("loop"), "completed"),
        (2, line("loop"), "completed"),
        (3, line("after"), "completed"),
    ]
    statuses = {
        0: RankStatus(f"waiting at {at('after')} in all_reduce"),
        1: RankStatus(f"waiting at {at('skip_sleep')} in sleep"),
    }
    assert verdict_lines(records(job), statuses) == [
        f"hang: rank 1 is missing from collective #4 all_reduce [3] float32 ({at('after')}); "
        f"rank 1 completed #3 and is at {at('skip_sleep')} in sleep",
        f"skip: rank 1 skipped collective #3 all_reduce [3] float32 ({at('loop')}) that rank 0 issued; "
        "from there its #n pairs with rank 0's #n+1",
    ]


def test_mismatched_shapes(tmp_path: Path) -> None:
    job = run_job(tmp_path, "mismatch")
    # gloo: one rank gets garbage, the other "Connection closed (or reset) by peer"
    assert any("by peer" in job[rank]["error"] for rank in (0, 1))
    statuses = {r: RankStatus("paused at x.py:1") for r in (0, 1)}
    assert verdict_lines(records(job), statuses) == [
        f"mismatch: collective #1 all_reduce differs: rank 0 [3] float32 ({at('mismatch')}), "
        f"rank 1 [4] float32 ({at('mismatch')})"
    ]


def test_early_exit(tmp_path: Path) -> None:
    job = run_job(tmp_path, "exits")
    assert "by peer" in job[0]["error"]  # "Connection closed by peer" or "... reset by peer"
    assert [e["seq"] for e in job[0]["log"]] == [1, 2, 3]
    statuses = {
        0: RankStatus(f"crashed RuntimeError: Connection closed by peer ({at('third')})"),
        1: RankStatus("exited 0"),
    }
    assert verdict_lines(records(job), statuses) == [
        "early exit: rank 1 exited 0 after #2, "
        f"but rank 0 crashed in collective #3 all_reduce [3] float32 ({at('third')})"
    ]


def test_deadlock(tmp_path: Path) -> None:
    job = run_job(tmp_path, "deadlock")
    statuses = {
        0: RankStatus(f"waiting at {at('dl_reduce')} in all_reduce"),
        1: RankStatus(f"waiting at {at('dl_barrier')} in barrier"),
    }
    assert verdict_lines(records(job), statuses) == [
        f"deadlock: rank 0 waits in #2 all_reduce ({at('dl_reduce')}); "
        f"rank 1 waits in #2 barrier ({at('dl_barrier')})"
    ]


def test_ddp_backward_all_reduces_are_in_the_flight_recorder(tmp_path: Path) -> None:
    job = run_job(tmp_path, "ddp")
    log = job[0]["log"]
    backward = [e for e in log if e["op"] == "all_reduce"]
    assert [(e["site"][1], e["state"]) for e in backward] == [(line("backward"), "completed")] * 2
    # DDP's construction (parameter checks and broadcast) is recorded at the user's DDP(...) line
    assert {e["op"] for e in log} == {"all_gather", "broadcast", "all_reduce"}
    assert summary(job[1]["log"]) == summary(log)


@pytest.mark.parametrize("wrappers", [False, True], ids=["flight_recorder", "wrappers"])
def test_p2p_ops_are_recorded_beside_the_collectives(tmp_path: Path, wrappers: bool) -> None:
    job = run_job(tmp_path, "p2p", wrappers)
    source = "wrappers" if wrappers else "flight_recorder"
    batch = line("p2p_batch")
    sides = {  # numbered per peer and direction: rank 0's third send to rank 1 pairs with rank 1's third recv
        0: [(1, "send", 1, "send", line("p2p_send")), (2, "isend", 1, "send", line("p2p_isend"))],
        1: [(1, "recv", 0, "recv", line("p2p_recv")), (2, "irecv", 0, "recv", line("p2p_irecv"))],
    }
    for rank in (0, 1):
        log = job[rank]["log"]
        assert [(e["seq"], e["op"], e.get("peer"), e.get("direction"), e["site"][1]) for e in log] == [
            (1, "all_reduce", None, None, line("p2p_first")),
            *sides[rank],
            (3 if rank == 0 else 1, "isend", 1 - rank, "send", batch),
            (3 if rank == 1 else 1, "irecv", 1 - rank, "recv", batch),
            (2, "all_reduce", None, None, line("p2p_last")),
        ]
        assert [e["source"] for e in log] == [source, *["wrappers"] * 4, source]
        assert {e["state"] for e in log} == {"completed"}
        assert [e["raw_op"] for e in log if e["p2p"]][2:] == ["batch_isend_irecv"] * 2
    assert verdict_lines(records(job)) == []


def test_wrappers_record_what_the_flight_recorder_would(tmp_path: Path) -> None:
    job = run_job(tmp_path, "basic", wrappers=True)
    for rank in (0, 1):
        log = job[rank]["log"]
        assert summary(log) == PLAIN
        assert {e["source"] for e in log} == {"wrappers"}
        assert job[rank]["tail"] == log[-2:]


def test_wrappers_miss_ddp_collectives_issued_from_cpp(tmp_path: Path) -> None:
    # documented: DDP's bucket all-reduces and its construction broadcasts never pass through Python
    job = run_job(tmp_path, "ddp", wrappers=True)
    assert job[0]["log"] == job[1]["log"] == []
