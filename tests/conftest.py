"""Shared test helpers: run ddptui for real, wait on conditions, find leftover processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from textual.pilot import Pilot

from ddptui.core.model.targets import parse_ranks
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def wait_for(condition: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    """Poll `condition` until it is true or `timeout` seconds pass; returns the last verdict."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


async def until(pilot: Pilot[Any], condition: Callable[[], object], timeout: float = 30.0) -> None:
    """Let a Textual app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await pilot.pause(0.02)


async def steady_identities(pilot: Pilot[Any], app: Any) -> None:
    """For snapshots: once every shown pane says who its rank is, pin the pid and host in it
    (they differ from run to run and machine to machine; test_app checks the real ones)."""
    from ddptui.ui.rank_pane import RankPane

    panes = [pane for pane in app.query(RankPane) if pane.display]
    await until(pilot, lambda: all(pane.identity for pane in panes))
    for pane in panes:
        pane.show_identity(f"local rank {pane.rank} · node · pid {4000 + pane.rank}")
    await pilot.pause()


def tagged_processes(tmpdir: Path) -> list[psutil.Process]:
    """Live processes whose environment carries TMPDIR=tmpdir: every rank and its children."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid == os.getpid() or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("TMPDIR") == str(tmpdir):
                found.append(proc)
        except psutil.Error:
            continue
    return found


class Runner:
    """Runs `python -m ddptui` with a private TMPDIR so its processes and files can be found."""

    def __init__(self, tmpdir: Path) -> None:
        self.tmpdir = tmpdir
        self.env = dict(os.environ, TMPDIR=str(tmpdir), PYTHONUNBUFFERED="1")

    def argv(self, *args: str) -> list[str]:
        """The command line."""
        return [sys.executable, "-m", "ddptui", *args]

    def run(self, *args: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ddptui to completion."""
        return subprocess.run(
            self.argv(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=ROOT,
        )

    def batch(
        self,
        script: Path | str,
        commands: str,
        *options: str,
        nproc: int = 2,
        stall: float = 3.0,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run a batch session over stdin."""
        return self.run(
            "--nproc-per-node",
            str(nproc),
            "--stall-timeout",
            str(stall),
            "--batch",
            "-",
            *options,
            str(script),
            stdin=commands,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """Start ddptui in the background, stdin a pipe."""
        return subprocess.Popen(
            self.argv(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=ROOT,
        )

    def leftovers(self) -> list[psutil.Process]:
        """Processes of this runner still alive."""
        return tagged_processes(self.tmpdir)

    def leftover_files(self) -> list[Path]:
        """Files ddptui left in its TMPDIR."""
        return list(self.tmpdir.iterdir())


@pytest.fixture
def ddptui(tmp_path: Path) -> Runner:
    """A ddptui runner whose processes must all be gone at the end of the test."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    runner = Runner(tmpdir)
    yield runner
    wait_for(lambda: not runner.leftovers(), timeout=5)
    left = runner.leftovers()
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    assert not left, f"processes left running: {left}"


def rank_lines(stdout: str, rank: int) -> list[str]:
    """What rank N printed in a batch transcript: its `[rank N] ` lines and the collapsed
    `[ranks 0-2,5] ` lines that include it, prefix removed."""
    found = []
    for line in stdout.splitlines():
        tag, sep, text = line.partition("] ")
        if sep and rank in tagged_ranks(tag + "]"):
            found.append(text)
    return found


def tagged_ranks(tag: str) -> frozenset[int]:
    """The ranks of a `[rank 3]` / `[ranks 0-2,5]` tag; empty for anything else."""
    for prefix in ("[rank ", "[ranks "):
        if tag.startswith(prefix) and tag.endswith("]"):
            try:
                return parse_ranks(tag[len(prefix) : -1], 1 << 20)
            except ValueError:
                return frozenset()
    return frozenset()


def summary(stdout: str) -> dict[int, str]:
    """The final `rank N: state` lines of a batch transcript."""
    result = {}
    for line in stdout.splitlines():
        head, sep, state = line.partition(": ")
        if sep and head.startswith("rank ") and head[5:].isdigit():
            result[int(head[5:])] = state
    return result


@contextlib.asynccontextmanager
async def running_session(
    script: Path,
    *args: str,
    nproc: int = 2,
    link_timeout: float = 60,
    line_editing: bool = True,
    stall_timeout: float = 2,
) -> AsyncIterator[Session]:
    """A started in-process session whose ranks have linked; every rank process is gone afterwards."""
    spec = LaunchSpec(
        target=str(script), args=args, nproc=nproc, stall_timeout=stall_timeout, line_editing=line_editing
    )
    session = Session(spec)
    await session.start()
    pids = [rank.transport.pid for rank in session.ranks]  # type: ignore[attr-defined]
    try:
        linked = await session.wait_until(
            lambda: all(r.transport.linked for r in session.ranks), link_timeout
        )
        assert linked, "ranks did not link"
        yield session
    finally:
        await session.close()
        assert not [
            pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
        ]
