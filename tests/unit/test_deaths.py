"""How a dead rank's death is said, and whether it died while starting or running the job."""

from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ddptui.core.diagnosis.deaths import death_of, death_words, joined
from ddptui.core.model.fatal import FatalDeath
from ddptui.core.model.output import OutputLog
from ddptui.core.model.state import RankState
from ddptui.rank.protocol import Frame

ABORT = (Path(__file__).parent / "fixtures" / "gloo_abort_rank2.log").read_bytes()
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def dead_rank(code: int, output: bytes = b"", **fields: Any) -> Any:
    """What `deaths` reads of a rank that exited with `code`."""
    log = OutputLog()
    log.append(output)
    rank = SimpleNamespace(state=RankState().running().exited(code), output=log)
    rank.final_collectives, rank.crash_frames = None, ()
    rank.__dict__.update(fields)
    return rank


def test_a_rank_gloo_aborted_died_in_the_job_and_says_why_and_where() -> None:
    rank = dead_rank(-signal.SIGABRT, ABORT)
    death = death_of(rank)
    assert death is not None and joined(rank, death)
    assert death_words(rank.state, death, 60) == (
        "killed by SIGABRT",
        "its main thread at tp_mismatch.py:13 (in all_reduce)",
        "gloo::EnforceNotMet: [enforce fail at /__w/pytorch/pytorc...",
    )


def test_a_rank_that_died_before_any_collective_died_while_starting() -> None:
    segfault = FatalDeath(
        "Fatal Python error: Segmentation fault", where=Frame("/job/t.py", 9), call="string_at"
    )
    rank = dead_rank(-signal.SIGSEGV)
    assert not joined(rank, segfault)
    state = RankState().running().exited(-signal.SIGSEGV, "at t.py:9 (in string_at)")
    assert death_words(state, segfault) == ("killed by SIGSEGV at t.py:9 (in string_at)", "", "")
    assert not joined(dead_rank(3), None)
    assert death_of(dead_rank(3, ABORT)) is None  # an exit status is no signal


def test_a_log_or_a_traceback_in_a_collective_says_the_rank_joined() -> None:
    logged = dead_rank(1, final_collectives=[{"seq": 1, "op": "barrier"}])
    assert joined(logged, None)
    assert not joined(dead_rank(1, final_collectives=[{"error": "no recorder"}]), None)
    in_init = (Frame(C10D, 1700, "init_process_group"), Frame("/job/t.py", 5, "<module>"))
    in_reduce = (Frame(C10D, 3252, "all_reduce"), Frame("/job/t.py", 9, "<module>"))
    assert not joined(dead_rank(1, crash_frames=in_init), None)
    assert joined(dead_rank(1, crash_frames=in_reduce), None)
