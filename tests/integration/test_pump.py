"""The pty pump: every byte, in order, before the exit; back-pressure; it ends with ddptui.

Real ranks (plain Python in real ptys, set raw so the bytes arrive unchanged), a real pump process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
from conftest import SCRIPTS, wait_for

from ddptui.core.session.session import Session
from ddptui.core.session.watchdog import PUMP_RESUMED, PUMP_STOPPED
from ddptui.core.transport import home_cpu, launch
from ddptui.core.transport.launch import LaunchSpec
from ddptui.core.transport.local import LocalJob, LocalRank
from ddptui.core.transport.pty_reader import EXIT_FLUSH
from ddptui.core.transport.ring import Ring

WRITER = textwrap.dedent(
    """
    import os, random, sys, tty
    tty.setraw(1)
    size, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    data = rng.randbytes(size)
    at = 0
    while at < size:
        at += os.write(1, data[at : at + rng.randint(1, 20000)])
    if len(sys.argv) > 3:
        os.kill(os.getpid(), 9)
    """
)
"""Writes SIZE seeded random bytes (every byte value) in writes of random sizes; a third argument
makes it die by SIGKILL right after its last write."""


def expected(size: int, seed: int) -> bytes:
    """What WRITER prints for `size` and `seed`."""
    import random

    return random.Random(seed).randbytes(size)


def env() -> dict[str, str]:
    """The environment of ranks and the pump: ddptui importable from this tree."""
    return dict(os.environ, PYTHONPATH=launch.python_path(os.environ.get("PYTHONPATH")) or "")


class Seen:
    """A rank's output and exit as the core sees them."""

    def __init__(self, rank: LocalRank) -> None:
        self.data = bytearray()
        self.at_exit: int | None = None
        """How many bytes had arrived when the exit status did."""
        self.exited = asyncio.get_running_loop().create_future()
        rank.on_output = self.data.extend
        rank.on_exit = self._exit

    def _exit(self, code: int) -> None:
        """Note the status and how much output came before it."""
        self.at_exit = len(self.data)
        self.exited.set_result(code)


@contextlib.asynccontextmanager
async def pumped_job(tmp_path: Path) -> AsyncIterator[LocalJob]:
    """A local job that asks for a pump; every rank and the pump are ended afterwards."""
    state = tmp_path / "state"
    state.mkdir()
    local = LocalJob(str(state), pump=True)
    local.start(env())
    try:
        yield local
    finally:
        for rank in local.ranks:
            rank.close()
        await asyncio.to_thread(local.end, 1.0)
        await asyncio.to_thread(local.release)


@pytest.fixture
async def job(tmp_path: Path) -> AsyncIterator[LocalJob]:
    """A local job whose ranks' ptys are read by a pump."""
    async with pumped_job(tmp_path) as local:
        yield local


def spawn(job: LocalJob, *args: str) -> tuple[LocalRank, Seen]:
    """A WRITER rank, and what it is seen printing."""
    rank = job.spawn([sys.executable, "-c", WRITER, *args], env(), None, (80, 24))
    return rank, Seen(rank)


def test_ring_wraps_and_hands_out_space_in_order() -> None:
    """Writes and takes across the end of the ring keep the bytes in order."""
    ring, fd = Ring.create(10)
    os.close(fd)
    out = bytearray()
    for chunk in (b"abcdefg", b"hijkl", b"mnopqrstu", b"vwxyz"):
        while chunk:
            free = ring.free()
            count = 0
            for view in free:
                part = chunk[count : count + len(view)]
                view[: len(part)] = part
                count += len(part)
            ring.wrote(count)
            chunk = chunk[count:]
            out += ring.take(3)
    out += ring.take(100)
    assert bytes(out) == b"abcdefghijklmnopqrstuvwxyz"
    assert ring.unread() == 0 and len(ring.free()) == 2 and sum(map(len, ring.free())) == 10
    ring.close()


async def test_flood_arrives_byte_exact_before_the_exit(job: LocalJob) -> None:
    """Several ranks flood at once: every byte, in order, all of it before the exit status."""
    ranks = [spawn(job, str(3_000_000), str(seed)) for seed in range(4)]
    for seed, (_, seen) in enumerate(ranks):
        assert await asyncio.wait_for(seen.exited, 30) == 0
        assert seen.at_exit == len(seen.data)
        assert bytes(seen.data) == expected(3_000_000, seed)
    assert job.pump is not None and job.pump.alive


async def test_full_ring_blocks_the_rank_and_drops_nothing(job: LocalJob) -> None:
    """A ring far smaller than the output: the pump waits for room, the rank waits for the pump."""
    assert job.pump is not None
    job.pump.ring_size = 4096 + 7
    _, seen = spawn(job, str(1_000_000), "7")
    assert await asyncio.wait_for(seen.exited, 30) == 0
    assert bytes(seen.data) == expected(1_000_000, 7)
    assert seen.at_exit == len(seen.data)


async def test_stalled_ui_holds_the_rank_back(job: LocalJob) -> None:
    """While the UI takes nothing, a rank stops once its ring and pty are full (nothing dropped).

    `wait_for` blocks the event loop here on purpose: that is the stalled UI.
    """
    assert job.pump is not None
    job.pump.ring_size = 65536
    rank, seen = spawn(job, str(2_000_000), "3")
    process = psutil.Process(rank.pid)
    ring = rank._ring
    assert ring is not None
    full = wait_for(lambda: ring.unread() == 65536 and process.status() == psutil.STATUS_SLEEPING, 10)
    assert full, "the rank should block on its full pty while the UI takes nothing"
    assert await asyncio.wait_for(seen.exited, 30) == 0
    assert bytes(seen.data) == expected(2_000_000, 3)


async def test_rank_killed_mid_flood_still_delivers_what_it_wrote(job: LocalJob) -> None:
    """SIGKILL right after the last write: every byte it wrote comes before the exit status."""
    _, seen = spawn(job, str(500_000), "11", "die")
    assert await asyncio.wait_for(seen.exited, 30) == -signal.SIGKILL
    assert bytes(seen.data) == expected(500_000, 11)
    assert seen.at_exit == len(seen.data)


async def test_child_holding_the_terminal_does_not_hold_back_the_exit(job: LocalJob) -> None:
    """A rank exits while its child keeps the pty open: the exit comes anyway, after the bytes."""
    script = (
        "import os, sys, time\nprint('parent done', flush=True)\nif os.fork() == 0:\n    time.sleep(30)\n"
    )
    rank = job.spawn([sys.executable, "-c", script], env(), None, (80, 24))
    seen = Seen(rank)
    assert await asyncio.wait_for(seen.exited, EXIT_FLUSH + 5) == 0
    assert b"parent done" in seen.data
    assert seen.at_exit == len(seen.data)


async def test_dead_pump_hands_the_ptys_back(job: LocalJob) -> None:
    """If the pump dies, the ranks' ptys are read here again: output and exits still arrive."""
    assert job.pump is not None
    rank = job.spawn(
        [sys.executable, "-c", "import sys; sys.stdin.readline(); print('after')"], env(), None, (80, 24)
    )
    seen = Seen(rank)
    job.pump.process.kill()
    assert await asyncio.to_thread(wait_for, lambda: not job.pump or not job.pump.alive, 5)
    rank.write(b"go\r")
    assert await asyncio.wait_for(seen.exited, 10) == 0
    assert b"after" in seen.data


async def test_pump_is_not_a_session_process_and_ends_with_release(tmp_path: Path) -> None:
    """The pump is neither signalled nor counted as a rank's; release ends it."""
    state = tmp_path / "state"
    state.mkdir()
    local = LocalJob(str(state), pump=True)
    local.start(env())
    assert local.pump is not None
    pump = psutil.Process(local.pump.process.pid)
    rank, seen = spawn(local, "10", "1")
    assert await asyncio.wait_for(seen.exited, 30) == 0
    assert pump.pid not in {p.pid for p in local.processes()}
    rank.close()
    await asyncio.to_thread(local.release)
    assert not pump.is_running()


def test_pump_ends_when_ddptui_is_killed() -> None:
    """SIGKILL of the process that started the pump ends the pump too."""
    program = textwrap.dedent(
        """
        import asyncio, os, sys
        from ddptui.core.transport.pump import Pump
        async def main():
            pump = Pump(dict(os.environ))
            print(pump.process.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, env=env(), text=True)
    assert owner.stdout is not None
    pump = psutil.Process(int(owner.stdout.readline()))
    owner.kill()
    owner.wait(timeout=5)
    assert wait_for(lambda: not pump.is_running() or pump.status() == psutil.STATUS_ZOMBIE, timeout=3)


async def pumped_session(script: Path, *args: str) -> Session:
    """A started two-rank session whose ptys the pump reads, every rank's first prompt on screen
    (the side channel's `paused` can come before the prompt's bytes)."""
    session = Session(LaunchSpec(target=str(script), args=args, nproc=2, stall_timeout=60, pump=True))
    await session.start()
    ready = await session.wait_until(
        lambda: all(r.state.at_prompt and r.prompt_shown() for r in session.ranks), 60
    )
    assert ready, [r.output.since(0)[-500:] for r in session.ranks]
    return session


async def test_session_flood_through_the_pump_arrives_whole_and_in_order() -> None:
    """20 MB a rank between two prompts: the kept tail is every line in order, then the prompt."""
    session = await pumped_session(SCRIPTS / "flood.py", "200000")
    assert session.resources.job is not None and session.resources.job.pump is not None
    pump = psutil.Process(session.resources.job.pump.process.pid)
    try:
        await asyncio.wait_for(session.broadcast("c"), 120)
        for rank in session.ranks:
            assert rank.state.at_prompt and rank.prompt_shown()
            lines = rank.output.since(rank.output.start).split(b"\r\n")[1:-1]
            numbers = [int(line[5:13]) for line in lines if line.startswith(b"line ")]
            assert numbers[-1] == 199_999 and numbers == list(range(numbers[0], 200_000))
        await asyncio.wait_for(session.broadcast("c"), 60)
        assert await session.wait_until(lambda: not session.live(range(2)), 30)
        assert all(b"done" in rank.output.tail(200) for rank in session.ranks)
    finally:
        await session.close()
    assert not pump.is_running() or pump.status() == psutil.STATUS_ZOMBIE


async def test_a_stopped_pump_is_named_once_and_its_resumption_too() -> None:
    """Ranks printing behind a stopped pump block where they print: the session says why."""
    session = await pumped_session(SCRIPTS / "flood.py", "100000")
    assert session.resources.job is not None and session.resources.job.pump is not None
    pump = session.resources.job.pump.process
    try:
        pump.send_signal(signal.SIGSTOP)
        step = asyncio.ensure_future(session.broadcast("c"))
        assert await session.wait_until(lambda: PUMP_STOPPED in session.notices, 10), session.notices
        assert PUMP_STOPPED.startswith("output stalled: ddptui's pty pump is stopped")
        await asyncio.sleep(1)
        assert session.notices.count(PUMP_STOPPED) == 1 and PUMP_RESUMED not in session.notices
        pump.send_signal(signal.SIGCONT)
        assert await session.wait_until(lambda: PUMP_RESUMED in session.notices, 10), session.notices
        await asyncio.wait_for(step, 120)
        assert all(rank.state.at_prompt for rank in session.ranks)
        assert session.notices.count(PUMP_STOPPED) == 1 and session.notices.count(PUMP_RESUMED) == 1
    finally:
        pump.send_signal(signal.SIGCONT)
        await session.close()


async def test_session_hostile_bytes_through_the_pump() -> None:
    """Garbage and hostile sequences reach the core as written; the ranks still answer."""
    session = await pumped_session(SCRIPTS / "hostile.py")
    try:
        for rank in session.ranks:
            assert b"\x1b[?1049h\x1b[2J\x1b]0;title\x07" in rank.output.since(0)
        answer = await asyncio.wait_for(session.broadcast("p marker"), 30)
        assert len(answer.replies) == 2 and all(b"still alive" in reply.output for reply in answer.replies), (
            answer
        )
    finally:
        await session.close()


async def test_without_memfd_the_ptys_are_read_on_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No memfd_create (Linux before 3.17): no ring can be made, so no pump starts and the ranks'
    ptys are read on the loop, every byte as with the pump."""

    def no_memfd(name: str, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", no_memfd)
    async with pumped_job(tmp_path) as job:
        assert job.pump is None
        rank, seen = spawn(job, str(200_000), "5")
        assert await asyncio.wait_for(seen.exited, 30) == 0
        assert bytes(seen.data) == expected(200_000, 5)
        assert rank._ring is None


CPUS = os.sched_getaffinity(0)
"""The CPUs this process may use (a rank gets them all)."""
AFFINITY = (
    "import os, sys; print('cpus', *sorted(os.sched_getaffinity(0)), 'end', flush=True); sys.stdin.readline()"
)
"""A rank that says which CPUs it may use, then waits for a line."""


async def cpus_of(job: LocalJob) -> list[int]:
    """The CPUs an AFFINITY rank of `job` may use (it is ended afterwards)."""
    rank = job.spawn([sys.executable, "-c", AFFINITY], env(), None, (80, 24))
    seen = Seen(rank)
    await asyncio.to_thread(wait_for, lambda: b" end" in seen.data, 10)
    rank.write(b"\r")
    assert await asyncio.wait_for(seen.exited, 10) == 0
    words = bytes(seen.data).split(b"cpus", 1)[1].split(b"end", 1)[0].split()
    return [int(word) for word in words]


@pytest.mark.skipif(len(CPUS) < 2, reason="nothing is pinned where ddptui may use one CPU only")
async def test_loop_and_pump_share_a_cpu_while_ranks_keep_every_cpu(tmp_path: Path) -> None:
    """The loop's thread and the pump on one CPU, a rank on all of them; released (from another
    thread), the loop's thread has them all back."""
    state = tmp_path / "state"
    state.mkdir()
    job = LocalJob(str(state), pump=True)
    job.start(env())
    try:
        assert job.pump is not None
        home = home_cpu.choose(CPUS)
        assert os.sched_getaffinity(0) == {home}
        assert psutil.Process(job.pump.process.pid).cpu_affinity() == [home]
        assert await cpus_of(job) == sorted(CPUS)
    finally:
        await asyncio.to_thread(job.end, 1.0)
        await asyncio.to_thread(job.release)
    assert os.sched_getaffinity(0) == CPUS
