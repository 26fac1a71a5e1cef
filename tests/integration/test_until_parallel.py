"""`until_collective` beyond DDP, on real gloo jobs: FSDP2, tensor parallel, a 2x2 (dp, tp) mesh
and a two-stage pipeline. Every rank stops before the collectives torch's own code issues, the
table names who issued it, and stepping on reaches the next ones."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from conftest import SCRIPTS
from test_until_collective import TIMEOUT, at, job, locations

from ddptui.core.commands.result import Result
from ddptui.core.commands.until import until_collective
from ddptui.core.session.session import Session

FSDP2 = SCRIPTS / "until_fsdp2.py"
TP = SCRIPTS / "until_tp.py"
MESH = SCRIPTS / "until_mesh_2d.py"
PIPELINE = SCRIPTS / "until_pipeline.py"
ROW = "all_reduce in RowwiseParallel output: DTensor redistribute Partial(sum)→Replicate()"
"""What the table says of tensor parallel's output all-reduce."""


def rows(result: Result) -> list[str]:
    """The table's rows, without its header (the lines after the one starting `rank  seq`)."""
    start = next(i for i, line in enumerate(result.lines) if line.split()[:2] == ["rank", "seq"])
    return list(result.lines[start + 1 :])


def free_port() -> int:
    """A TCP port free right now on localhost."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def finish(session: Session, nproc: int = 2) -> None:
    """`c` on every rank; each must exit 0."""
    await session.broadcast("c")
    assert await session.wait_until(lambda: not session.live(range(nproc)), TIMEOUT)
    assert [rank.state.exit_code for rank in session.ranks] == [0] * nproc


async def test_fsdp2_stops_before_each_all_gather_then_backward_reduce_scatters() -> None:
    async with job("", script=FSDP2) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert result.lines[0] == "all 2 ranks about to enter #1 all_gather_single [72] float32"
        assert rows(result)[0].split()[:8] == [
            "0-1",
            "#1",
            "all_gather_single",
            "in",
            "FSDP2",
            "all-gather",
            "for",
            "0",
        ]
        assert "(forward)" in rows(result)[0] and str(at("forward", FSDP2)) in rows(result)[0]
        assert locations(session) == [at("forward", FSDP2)] * 2
        assert b"--Collective: all_gather_single [72] float32 in FSDP2 all-gather for 0 (forward)--" in (
            session.ranks[1].output.tail(2000)
        )
        again = await until_collective(session)  # the next layer's, in the same forward
        assert "FSDP2 all-gather for 2 (forward)" in rows(again)[0], again.lines
        await session.broadcast("n")  # the rest of the forward, on both ranks together
        assert locations(session) == [at("backward", FSDP2)] * 2
        seen = []
        for _ in range(6):  # backward: all-gathers again, then reduce-scatters the gradients
            step = await until_collective(session)
            assert not step.error and locations(session) == [at("backward", FSDP2)] * 2, step.lines
            seen.append(rows(step)[0])
            if "reduce_scatter_single" in seen[-1]:
                break
        assert "FSDP2 reduce-scatter for 2 (backward)" in seen[-1], seen
        await finish(session)
        assert b"rank 0 loss -0.5540" in session.ranks[0].output.since(0)


async def test_tensor_parallel_stops_before_the_rowwise_output_all_reduce() -> None:
    async with job("grad", script=TP) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert result.lines[0].startswith("all 2 ranks about to enter #"), result.lines
        assert result.lines[0].endswith(" all_reduce [2,4] float32")
        assert ROW in rows(result)[0]
        assert locations(session) == [at("forward", TP)] * 2
        await session.broadcast("n")  # the forward, its all-reduce on both ranks
        assert locations(session) == [at("loss", TP)] * 2
        backward = await until_collective(session)  # the input's gradient, Partial in backward
        assert locations(session) == [at("backward", TP)] * 2, backward.lines
        assert (
            "all_reduce in Tensor.backward: DTensor redistribute Partial(sum)→Replicate()"
            in rows(backward)[0]
        )
        await finish(session)


async def test_a_2d_mesh_stops_at_fsdp2_across_dp_then_tensor_parallel_within_tp() -> None:
    async with job("", nproc=4, script=MESH) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert list(result.lines[:2]) == [
            "ranks 0,2 about to enter #1 on dp group [0,2] (tp=0) all_gather_single [54] float32",
            "ranks 1,3 about to enter #1 on dp group [1,3] (tp=1) all_gather_single [54] float32",
        ], result.lines
        assert all("FSDP2 all-gather for (root) (forward)" in row for row in rows(result))
        tp = await until_collective(session)
        assert [line.split(" about")[0] for line in tp.lines[:2]] == ["ranks 0-1", "ranks 2-3"], tp.lines
        assert "#5 on tp group [0,1] (dp=0) all_reduce [2,4] float32" in tp.lines[0], tp.lines
        assert "#5 on tp group [2,3] (dp=1) all_reduce [2,4] float32" in tp.lines[1], tp.lines
        assert all(ROW in row for row in rows(tp))
        assert locations(session) == [at("forward", MESH)] * 4
        await session.broadcast("n")
        backward = await until_collective(session)
        assert locations(session) == [at("backward", MESH)] * 4
        assert all(
            "reduce_scatter_single in FSDP2 reduce-scatter for (root) (backward)" in r for r in rows(backward)
        )
        await finish(session, 4)


async def test_a_pipeline_stops_before_each_send_and_receive() -> None:
    async with job("", script=PIPELINE) as session:
        result = await until_collective(session)
        assert not result.error, result.lines
        assert result.lines[0] == "rank 0 about to send [1] int32 to rank 1, which is about to receive it"
        assert "send in pipeline stage 0 warmup forward vote to 1" in rows(result)[0]
        assert "recv in pipeline stage 1 warmup forward vote from 0" in rows(result)[1]
        assert locations(session) == [at("first", PIPELINE), at("last", PIPELINE)]
        for _ in range(12):  # the warm-up and the shapes first, then the first microbatch
            step = await until_collective(session)
            assert not step.error, step.lines
            if "forward send" in step.lines[2]:
                break
        assert step.lines[0] == "rank 0 about to isend [2,8] float32 to rank 1, which is about to receive it"
        assert "isend in pipeline stage 0 forward send to 1" in rows(step)[0]
        assert "irecv in pipeline stage 1 forward recv from 0" in rows(step)[1]
        await finish(session)
        assert b"rank 1 losses [" in session.ranks[1].output.since(0)


def test_arming_keeps_torch_functions_and_disarming_puts_every_object_back() -> None:
    script = SCRIPTS / "until_points_identity.py"
    env = dict(os.environ, PORT=str(free_port()))
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0 and done.stdout.startswith("ok 3.0"), done.stderr[-2000:]
