"""Hints on real failures: each `tests/scripts/hint_*.py` run as real ranks on CPU torch with gloo."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SCRIPTS

from ddptui.core.diagnosis.hints import hint_for

TIMEOUT = 60.0
"""Seconds a whole job may take; the slowest (a 3 s init timeout) needs about 10."""


@dataclass(frozen=True)
class Ended:
    """How one rank ended."""

    status: int
    stderr: str


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rank_env(rank: int, nproc: int, port: int) -> dict[str, str]:
    """torchrun's environment for one rank of `nproc` on this machine."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("TORCH_DISTRIBUTED")}
    env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc))
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def run_ranks(
    tmp_path: Path, script: str, nproc: int, *args: str, until: set[int] | None = None
) -> list[Ended]:
    """Run `script` as `nproc` ranks with plain `python` until the ranks `until` (default all) ended.

    Every rank is ended by the time this returns: the others are killed (status -9).
    """
    port = free_port()
    logs = [tmp_path / f"stderr-{rank}.txt" for rank in range(nproc)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank, log in enumerate(logs):
            with log.open("wb") as stderr:
                argv = [sys.executable, str(SCRIPTS / script), *args]
                env = rank_env(rank, nproc, port)
                procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr))
        deadline = time.monotonic() + TIMEOUT
        for rank, proc in enumerate(procs):
            if until is None or rank in until:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return [
        Ended(proc.returncode, log.read_text(errors="replace")) for proc, log in zip(procs, logs, strict=True)
    ]


@contextmanager
def held_port() -> Iterator[int]:
    """A port some other program listens on, for as long as the block runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("script", "advice"),
    [
        ("hint_cuda_set_device.py", 'use device "cpu" and the "gloo" backend'),
        ("hint_cuda_tensor.py", 'use device "cpu" and the "gloo" backend'),
        ("hint_nccl.py", 'init_process_group(backend="gloo")'),
        ("hint_no_init.py", "call dist.init_process_group()"),
        ("hint_ready_twice.py", "checkpoint(..., use_reentrant=False)"),
    ],
)
def test_one_rank_failures(tmp_path: Path, script: str, advice: str) -> None:
    (rank0,) = run_ranks(tmp_path, script, 1)
    assert rank0.status == 1
    hint = hint_for(rank0.stderr)
    assert hint is not None and advice in hint, rank0.stderr[-2000:]


@pytest.mark.parametrize(
    ("signal_name", "advice"),
    [("SIGBUS", "ran out of shared memory (/dev/shm)"), ("SIGKILL", "often the out-of-memory killer")],
)
def test_a_dataloader_worker_killed_by_a_signal(tmp_path: Path, signal_name: str, advice: str) -> None:
    (rank0,) = run_ranks(tmp_path, "hint_dataloader_signal.py", 1, signal_name)
    assert rank0.status == 1
    assert "exited unexpectedly" in rank0.stderr  # what the rank's crash line says
    hint = hint_for(rank0.stderr)
    assert hint is not None and advice in hint, rank0.stderr[-2000:]


def test_taken_master_port(tmp_path: Path) -> None:
    with held_port() as port:
        (rank0,) = run_ranks(tmp_path, "hint_master_port.py", 1, str(port))
    assert rank0.status == 1
    assert "EADDRINUSE" in rank0.stderr
    hint = hint_for(rank0.stderr)
    assert hint is not None and "hard-codes MASTER_PORT" in hint


def test_unused_parameter_on_two_ranks(tmp_path: Path) -> None:
    ended = run_ranks(tmp_path, "hint_unused_parameter.py", 2)
    for rank in ended:
        assert rank.status == 1
        hint = hint_for(rank.stderr)
        assert hint is not None and "find_unused_parameters=True" in hint, rank.stderr[-2000:]


def test_script_world_larger_than_ranks_started(tmp_path: Path) -> None:
    (rank0,) = run_ranks(tmp_path, "hint_world_size_2.py", 1)
    assert rank0.status == 1
    assert hint_for(rank0.stderr) == (
        "only 1 of 2 ranks joined: if the script hard-codes world_size=2, pass --nproc-per-node 2"
    )


def test_script_world_smaller_than_ranks_started(tmp_path: Path) -> None:
    rank0, rank1 = run_ranks(tmp_path, "hint_world_size_1.py", 2, until={1})
    assert rank0.status == -9  # still training in a world of its own
    assert hint_for(rank0.stderr) is None
    assert rank1.status == 1
    assert hint_for(rank1.stderr) == (
        "rank 1 is outside the script's world size 1: it hard-codes world_size; pass --nproc-per-node 1"
    )
