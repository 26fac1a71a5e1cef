"""`until_collective` on real 2-rank gloo jobs: ranks run to their next collective and are compared there."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
from conftest import SCRIPTS

from ddptui.core.commands.until import Stop, release, stop_from, table, until_collective, verdict
from ddptui.core.model.state import Frame, Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError, answered
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank.asks import Collectives, Eval, UntilPending

TIMEOUT = 60
JOB = SCRIPTS / "until_job.py"
DDP_JOB = SCRIPTS / "until_ddp.py"


def line_of(tag: str, script: Path = JOB) -> int:
    """The line of a job script marked `# @tag`."""
    for number, text in enumerate(script.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# @{tag}"):
            return number
    raise LookupError(tag)


def at(tag: str, script: Path = JOB) -> Frame:
    """The location of a marked line, as rank states give it."""
    return Frame(str(script), line_of(tag, script), "<module>")


@contextlib.asynccontextmanager
async def job(scenario: str, nproc: int = 2, script: Path = JOB) -> AsyncIterator[Session]:
    """A session of a job script with every rank at its first prompt; all its processes gone after."""
    session = Session(LaunchSpec(target=str(script), args=(scenario,), nproc=nproc, stall_timeout=2))
    await session.start()
    pids = [rank.transport.pid for rank in session.ranks]
    try:
        ready = await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), TIMEOUT)
        assert ready, [(r.state, r.output.since(0)[-2000:]) for r in session.ranks]
        yield session
    finally:
        await session.close()
        assert not [
            pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
        ]


def locations(session: Session) -> list[Frame | None]:
    """Where each rank stands."""
    return [rank.state.location for rank in session.ranks]


async def test_consistent_ranks_stop_before_the_collective_and_step_over_it_together() -> None:
    async with job("consistent") as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert result.lines[0] == "all 2 ranks about to enter #1 all_reduce [3] float32"
        assert result.lines[1].split() == ["rank", "seq", "op", "shapes", "dtypes", "at"]
        assert result.lines[2].split() == ["0-1", "#1", "all_reduce", "[3]", "float32", str(at("all_reduce"))]
        assert all(rank.state.at_prompt for rank in session.ranks)
        assert locations(session) == [at("all_reduce")] * 2
        stepped = await session.broadcast("n")
        assert locations(session) == [at("after")] * 2, [a.output for a in stepped.replies]
        totals = await session.ask(Eval("float(tensor.sum())"), range(2))
        assert [r["repr"] for r in answered(totals).values()] == ["12.0", "12.0"]
        again = await until_collective(session)  # the next one: the barrier, #2
        assert again.lines[0] == "all 2 ranks about to enter #2 barrier", again.lines
        assert locations(session) == [at("barrier")] * 2
        await session.broadcast("c")
        assert await session.wait_until(lambda: not session.live(range(2)), TIMEOUT)
        assert [rank.state.exit_code for rank in session.ranks] == [0, 0]
        assert b"rank 1 total 12.0" in session.ranks[1].output.since(0)


async def test_a_mismatch_is_reported_and_every_rank_stays_at_its_prompt() -> None:
    async with job("mismatch") as session:
        result = await until_collective(session)
        assert result.error
        site = str(at("all_reduce"))
        assert result.lines[0] == (
            f"mismatch: collective #1 all_reduce differs: rank 0 [3] float32 ({site}), "
            f"rank 1 [4] float32 ({site})"
        )
        assert [line.split()[:4] for line in result.lines[2:4]] == [
            ["0", "#1", "all_reduce", "[3]"],
            ["1", "#1", "all_reduce", "[4]"],
        ]
        assert all(rank.state.at_prompt for rank in session.ranks)
        assert locations(session) == [at("all_reduce")] * 2
        # A lockstep `n` does not run the mismatched collective: each rank says so, stays put.
        stepped = await session.broadcast("n")
        assert all(rank.state.at_prompt for rank in session.ranks)
        assert locations(session) == [at("all_reduce")] * 2
        assert all(b"held before all_reduce, mismatch: collective #1" in a.output for a in stepped.replies), [
            a.output for a in stepped.replies
        ]
        shapes = await session.ask(Eval("tensor.shape"), range(2))
        assert [r["repr"] for r in answered(shapes).values()] == [
            "torch.Size([3])",
            "torch.Size([4])",
        ]
        await release(session)  # `!n` would: the hold is gone, the record stays
        answers = await session.ask(UntilPending(), range(2))
        assert [(r["op"], r["held"]) for r in answered(answers).values() if r is not None] == [
            ("all_reduce", ""),
        ] * 2


async def test_a_rank_that_exits_without_a_collective_is_reported_exited() -> None:
    async with job("exit") as session:
        result = await until_collective(session)
        assert result.error
        assert (
            result.lines[0] == "rank 0 about to enter #1 all_reduce [3] float32; not there: rank 1 exited 0"
        )
        assert result.lines[3].split() == ["1", "-", "exited", "0"]
        assert session.ranks[0].state.at_prompt and session.ranks[0].state.location == at("all_reduce")
        assert session.ranks[1].state.exit_code == 0


async def test_a_rank_inside_a_collective_the_stop_cannot_see_is_waiting_in_it() -> None:
    async with job("hidden") as session:
        result = await until_collective(session)
        assert (
            result.lines[0]
            == "all 2 ranks about to enter #1 broadcast [3] float32 (rank 1 already waiting in it)"
        ), result.lines
        assert session.ranks[1].state.phase is Phase.WAITING
        assert "(waiting in it)" in result.lines[3] and str(at("hidden")) in result.lines[3]
        assert session.ranks[0].state.location == at("broadcast")
        await session.broadcast("n", [0])  # rank 0 enters it too: both go on
        assert session.ranks[0].state.location == at("after")
        assert await session.wait_until(lambda: session.ranks[1].state.at_prompt, TIMEOUT)
        assert session.ranks[1].state.location == at("barrier")  # still armed: it stopped at its next one


async def test_a_reference_taken_at_import_is_stopped_before_too() -> None:
    async with job("early") as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert result.lines[0] == "all 2 ranks about to enter #1 all_reduce [3] float32"
        assert locations(session) == [at("all_reduce"), at("early")]
        await session.broadcast("n")
        assert locations(session) == [at("after")] * 2


async def test_a_batch_of_sends_and_receives_meets_its_peers_batch() -> None:
    async with job("ring") as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert list(result.lines[:2]) == [
            "rank 0 about to isend [3] float32 to rank 1, which is about to receive it",
            "rank 1 about to isend [3] float32 to rank 0, which is about to receive it",
        ]
        assert "isend in batch_isend_irecv to 1 (1 of 2)" in result.lines[3], result.lines
        assert locations(session) == [at("ring")] * 2
        await session.broadcast("n")  # P2POps made unarmed still pass batch_isend_irecv's checks
        assert locations(session) == [at("after")] * 2
        received = await session.ask(Eval("float(received.sum())"), range(2))
        assert [r["repr"] for r in answered(received).values()] == ["3.0", "3.0"]


# -- DDP: the gradients are all-reduced from C++ inside backward() -----------------------------------


def ddp_at(tag: str) -> Frame:
    """A marked line of until_ddp.py."""
    return at(tag, DDP_JOB)


async def grad_sums(session: Session) -> list[str]:
    """Each rank's sum of its DDP weight's gradient."""
    sums = await session.ask(Eval("float(model.module.weight.grad.sum())"), range(2))
    return [str(r) if isinstance(r, RequestError) else r["repr"] for r in sums.values()]


async def test_ranks_stop_at_loss_backward_before_ddp_all_reduces_the_gradients() -> None:
    async with job("train", script=DDP_JOB) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        seq = result.lines[0].split()[6]  # DDP's construction ran collectives of its own before
        assert result.lines[0] == f"all 2 ranks about to enter {seq} all_reduce [10] float32", result.lines
        assert result.lines[2].split() == [
            "0-1", seq, "all_reduce", "in", "DDP", "backward", "[10]", "float32", str(ddp_at("backward")),
        ]  # fmt: skip
        assert locations(session) == [ddp_at("backward")] * 2
        stopped = session.ranks[0].output.tail(2000)
        assert b"--Collective: all_reduce [10] float32 in DDP backward--" in stopped
        stepped = await session.broadcast("n")  # backward, and the all-reduce in it, on both ranks
        assert locations(session) == [ddp_at("step")] * 2, [a.output for a in stepped.replies]
        # the inputs differ (rank r holds ones * (r + 1)): equal gradients mean they were averaged
        assert await grad_sums(session) == ["36.0", "36.0"]
        logs = await session.ask(Collectives(last=1), range(2))
        assert [(r[-1]["op"], f"#{r[-1]['seq']}") for r in answered(logs).values()] == [
            ("all_reduce", seq)
        ] * 2, "the Flight Recorder numbers DDP's all-reduce as the stop did"
        await session.broadcast("c")
        assert await session.wait_until(lambda: not session.live(range(2)), TIMEOUT)
        assert [rank.state.exit_code for rank in session.ranks] == [0, 0]


async def test_a_rank_that_all_reduces_a_metric_before_backward_is_a_mismatch() -> None:
    async with job("branch", script=DDP_JOB) as session:
        result = await until_collective(session)
        assert result.error
        assert result.lines[0].startswith("mismatch: collective #"), result.lines
        differ = f"rank 0 [10] float32 ({ddp_at('backward')}), rank 1 [] float32 ({ddp_at('metric')})"
        assert f"all_reduce differs: {differ}" in result.lines[0]
        assert [line.split()[2:4] for line in result.lines[2:4]] == [
            ["all_reduce", "in"],
            ["all_reduce", "[]"],
        ]
        assert locations(session) == [ddp_at("backward"), ddp_at("metric")]
        assert all(rank.state.at_prompt for rank in session.ranks)


async def test_a_backward_under_no_sync_is_no_stop() -> None:
    async with job("nosync", script=DDP_JOB) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert locations(session) == [ddp_at("backward")] * 2  # not ddp_at("nosync")
        await session.broadcast("n")
        # each rank's own gradient from the no_sync backward, plus the averaged one
        assert await grad_sums(session) == ["72.0", "72.0"]


# -- verdicts on given stops (no ranks) ------------------------------------------------------------


def stop(rank: int, op: str, seq: int, shape: int = 3, **extra: object) -> Stop:
    """A rank stopped before `op` on a [shape] float32 tensor at train.py:8."""
    value = {"seq": seq, "op": op, "shapes": [[shape]], "dtypes": ["float32"], "site": ["train.py", 8, "f"]}
    value.update(p2p=op in ("send", "recv", "isend", "irecv"), **extra)
    return stop_from(rank, "paused at train.py:8", value, inside=False)


def test_ranks_before_different_collectives_are_a_mismatch() -> None:
    (finding,) = verdict([stop(0, "all_reduce", 3), stop(1, "all_reduce", 4)], {})
    assert finding.mismatch and finding.ranks == {0, 1}
    assert finding.text == (
        "mismatch: the ranks stand before different collectives: rank 0 #3 all_reduce [3] float32 "
        "(train.py:8), rank 1 #4 all_reduce [3] float32 (train.py:8)"
    )


def test_a_different_root_is_a_mismatch() -> None:
    stops = [stop(0, "broadcast", 2, peer=0), stop(1, "broadcast", 2, peer=1)]
    (finding,) = verdict(stops, {})
    assert finding.text == "mismatch: collective #2 broadcast differs: rank 0 root 0, rank 1 root 1"
    assert [line.split()[2:4] for line in table(stops)[1:]] == [["broadcast", "root"]] * 2


def test_sends_pair_with_receives() -> None:
    good = verdict([stop(0, "send", 0, peer=1), stop(1, "recv", 0, peer=0)], {})
    assert [f.text for f in good] == [
        "rank 0 about to send [3] float32 to rank 1, which is about to receive it"
    ]
    bad = verdict([stop(0, "send", 0, peer=1), stop(1, "recv", 0, shape=4, peer=0)], {})
    assert bad[0].mismatch and bad[0].text.endswith("but rank 1 receives [4] float32")
    alone = verdict([stop(0, "send", 0, peer=1), Stop(1, "exited 0")], {1: "exited 0"})
    assert alone[0].problem and alone[0].text.endswith("not there: rank 1 exited 0")


def test_the_legs_of_a_batch_meet_their_peers_in_any_order() -> None:
    def ring(rank: int, *legs: tuple[str, int, int]) -> Stop:
        """A rank stopped before a batch of (op, peer, size) legs."""
        batch = [
            {"op": op, "peer": peer, "shapes": [[size]], "dtypes": ["float32"]} for op, peer, size in legs
        ]
        return stop(rank, legs[0][0], 0, legs[0][2], peer=legs[0][1], batch=batch)

    good = verdict([ring(0, ("isend", 1, 3), ("irecv", 1, 3)), ring(1, ("isend", 0, 3), ("irecv", 0, 3))], {})
    assert [f.text for f in good] == [
        "rank 0 about to isend [3] float32 to rank 1, which is about to receive it",
        "rank 1 about to isend [3] float32 to rank 0, which is about to receive it",
    ]
    bad = verdict([ring(0, ("isend", 1, 3), ("irecv", 1, 3)), ring(1, ("isend", 0, 3), ("irecv", 0, 4))], {})
    assert [f.mismatch for f in bad] == [True, False]
    assert bad[0].text.endswith("but rank 1 receives [4] float32")
    assert "(1 of 2)" in table([ring(0, ("isend", 1, 3), ("irecv", 1, 3))])[1]


def test_a_group_member_outside_the_targets_is_named() -> None:
    states = {1: "exited 0", 2: "paused at train.py:3", 3: "paused at train.py:3"}
    (finding,) = verdict([stop(0, "all_reduce", 1, members=[0, 1, 2, 3])], states)
    assert finding.problem and not finding.mismatch
    assert finding.text == (
        "rank 0 about to enter #1 all_reduce [3] float32; not there: rank 1 exited 0; "
        "ranks 2-3 paused at train.py:3"
    )
