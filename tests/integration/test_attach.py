"""`ddptui attach PID` on a real 2-rank job started by plain torchrun, read through a real py-spy."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, SCRIPTS, wait_for

from ddptui.core.attach.job import RankProcess
from ddptui.core.attach.look import RankView
from ddptui.core.attach.py_spy import NOT_INSTALLED, NOT_PERMITTED, dump_problem, find_py_spy, parse_dump
from ddptui.core.attach.report import verdict
from ddptui.rank.protocol import Frame

SCRIPT = SCRIPTS / "attach_hang.py"
SHOWN = "tests/scripts/attach_hang.py"
"""The script as ddptui shows it: relative to the working directory, ROOT."""
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def line(marker: str) -> int:
    """The line of the script marked `# @marker`."""
    for number, text in enumerate(SCRIPT.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# @{marker}"):
            return number
    raise LookupError(marker)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def py_spy_problem() -> str | None:
    """Why py-spy cannot read a Python process here (not installed, ptrace refused), or None."""
    py_spy = find_py_spy()
    if py_spy is None:
        return "py-spy is not installed"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        done = subprocess.run(
            [py_spy, "dump", "--pid", str(sleeper.pid), "--json", "--nonblocking"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            return f"py-spy cannot read a process here: {(done.stderr or done.stdout).strip()[:200]}"
        return None if parse_dump(done.stdout, sleeper.pid) else "py-spy read no stack"
    finally:
        sleeper.kill()
        sleeper.wait()


needs_py_spy = pytest.mark.skipif(
    (problem := py_spy_problem()) is not None, reason=f"ddptui attach needs py-spy: {problem}"
)


def attach(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ddptui attach ARGS` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "ddptui", "attach", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, **(env or {})),
    )


class Job:
    """A 2-rank torchrun job of attach_hang.py, and its ranks once both are in place."""

    def __init__(self, agent: subprocess.Popen[bytes], log: Path) -> None:
        self.agent = agent
        self.log = log

    def ranks(self) -> dict[int, psutil.Process]:
        """The agent's children that are ranks, by RANK."""
        found = {}
        for child in psutil.Process(self.agent.pid).children():
            with contextlib.suppress(psutil.Error):
                found[int(child.environ()["RANK"])] = child
        return found


@contextlib.contextmanager
def torchrun_job(tmp_path: Path, *args: str) -> Iterator[Job]:
    """Start the job under plain torchrun; kill the agent and every process under it at the end."""
    log = tmp_path / "job.log"
    argv = [TORCHRUN, "--nproc-per-node", "2", "--master-port", str(free_port()), str(SCRIPT), *args]
    with log.open("wb") as out:
        agent = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    job = Job(agent, log)
    try:
        placed = wait_for(lambda: log.read_text(errors="replace").count("in place") == 2, timeout=90)
        assert placed, f"the job did not get in place:\n{log.read_text(errors='replace')}"
        time.sleep(0.5)  # from the print into the all_reduce, the sleep or the loop
        yield job
    finally:
        everyone = [psutil.Process(agent.pid)]
        with contextlib.suppress(psutil.Error):
            everyone += everyone[0].children(recursive=True)
        for proc in everyone:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        _, alive = psutil.wait_procs(everyone, timeout=10)
        agent.wait(timeout=10)
        assert not alive, f"processes left running: {alive}"


def table(stdout: str) -> dict[int, str]:
    """The state column of the `rank local world host pid cpu state` table, by rank."""
    rows = {}
    for text in stdout.splitlines():
        cells = text.split(None, 6)
        if len(cells) == 7 and cells[0].isdigit() and cells[4].isdigit():
            rows[int(cells[0])] = cells[6]
    return rows


@needs_py_spy
def test_attach_to_torchrun_places_each_rank_and_names_the_hang(tmp_path: Path) -> None:
    with torchrun_job(tmp_path) as job:
        ranks = job.ranks()
        done = attach(str(job.agent.pid))
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert table(done.stdout) == {
            0: f"waiting at {SHOWN}:{line('hang')} in all_reduce",
            1: f"waiting at {SHOWN}:{line('sleep')}",
        }
        verdict = (
            f"hang: rank 0 waits in all_reduce ({SHOWN}:{line('hang')}); rank 1 is at {SHOWN}:{line('sleep')}"
        )
        assert done.stdout.splitlines()[-1] == verdict
        assert f"pid {job.agent.pid} (torchrun " in done.stdout.splitlines()[0]
        assert "ranks 0-1 of world size 2" in done.stdout.splitlines()[0]
        # Read-only: both ranks still stand where they were, and rank 0's child is no rank.
        assert job.ranks() == ranks
        assert all(proc.status() != psutil.STATUS_STOPPED for proc in ranks.values())
        assert len(table(done.stdout)) == 2


@needs_py_spy
def test_attach_to_a_rank_in_batch_mode(tmp_path: Path) -> None:
    with torchrun_job(tmp_path) as job:
        rank1 = job.ranks()[1]
        done = attach(str(rank1.pid), "--batch", "-", stdin=":state\n\nn\n:stacks\n:quit\n:state\n")
        assert done.returncode == 0, done.stderr
        out = done.stdout.splitlines()
        assert f"attached read-only to pid {job.agent.pid}" in out[0]
        assert [text for text in out if text.startswith("(ddptui)")] == [
            "(ddptui) :state",
            "(ddptui) n",
            "(ddptui) :stacks",
            "(ddptui) :quit",
        ]
        assert table(done.stdout)[0] == f"waiting at {SHOWN}:{line('hang')} in all_reduce"
        assert any(text.startswith("ddptui: attach is read-only") for text in out)
        stacks = out[out.index("(ddptui) :stacks") + 1 : out.index("(ddptui) :quit")]
        assert stacks[0].startswith("ranks 0-1") and "<module>" in stacks[0]
        assert any(text.startswith("├ rank 0") and f":{line('hang')})" in text for text in stacks)
        assert any(text.startswith("└ rank 1") and f":{line('sleep')})" in text for text in stacks)
        assert any("all_reduce (torch/distributed/distributed_c10d.py:" in text for text in stacks)


@needs_py_spy
def test_a_busy_rank_is_running(tmp_path: Path) -> None:
    with torchrun_job(tmp_path, "spin") as job:
        done = attach(str(job.agent.pid))
        assert done.returncode == 0, done.stderr
        assert table(done.stdout)[1] == f"running at {SHOWN}:{line('spin')}"
        assert done.stdout.splitlines()[-1] == (
            f"hang: rank 0 waits in all_reduce ({SHOWN}:{line('hang')}); "
            f"rank 1 is running at {SHOWN}:{line('spin')}"
        )


def test_without_py_spy_the_ranks_are_still_listed(tmp_path: Path) -> None:
    refuses = tmp_path / "py-spy"
    refuses.write_text(
        '#!/bin/sh\necho "Permission Denied: Try running again with elevated permissions"\nexit 1\n'
    )
    refuses.chmod(0o755)
    with torchrun_job(tmp_path) as job:
        for py_spy, note in (("", NOT_INSTALLED), (str(refuses), NOT_PERMITTED)):
            done = attach(str(job.agent.pid), env={"DDPTUI_PY_SPY": py_spy})
            assert done.returncode == 0, done.stderr
            assert f"ddptui: {note}" in done.stdout.splitlines()
            assert table(done.stdout) == {0: "idle", 1: "idle"}
            assert done.stdout.splitlines()[-1] == "no verdict: no rank's stack could be read"


def test_no_such_process_is_one_line_and_status_2() -> None:
    pid = 1 << 22
    while psutil.pid_exists(pid):
        pid += 1
    done = attach(str(pid))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"ddptui: error: no such process: {pid}\n")


def test_a_process_without_ranks_is_one_line_and_status_2() -> None:
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env={"PATH": "/usr/bin"}
    )
    try:
        done = attach(str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"ddptui: error: neither pid {sleeper.pid} (")
    assert done.stderr.count("\n") == 1


def test_a_zombie_is_said_to_be_one_in_one_line_and_status_2() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, timeout=30)
        done = attach(str(child.pid))
    finally:
        child.wait()
    said = (
        f"ddptui: error: pid {child.pid} is a zombie (exited, not yet reaped by its parent {os.getpid()})\n"
    )
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)


def test_a_command_line_with_newlines_is_said_on_one_line() -> None:
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time\ntime.sleep(30)"], env={"PATH": "/usr/bin"}
    )
    try:
        done = attach(str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"ddptui: error: neither pid {sleeper.pid} (-c import time\\ntime.sleep(30)) "
        "nor a child of it has RANK in its environment\n"
    )


def test_the_heading_names_a_launcher_with_newlines_on_one_line() -> None:
    code = (
        "import os, subprocess, sys\n"
        "env = dict(os.environ, RANK='0', WORLD_SIZE='1')\n"
        "subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'], env=env)"
    )
    launcher = subprocess.Popen([sys.executable, "-c", code], env={"PATH": "/usr/bin"})
    try:
        assert wait_for(lambda: psutil.Process(launcher.pid).children(), timeout=30)
        done = attach(str(launcher.pid))
    finally:
        for child in psutil.Process(launcher.pid).children():
            child.kill()
        launcher.kill()
        launcher.wait()
    assert done.returncode == 0, done.stderr
    shown = ("-c " + code.replace("\n", "\\n"))[:59] + "…"
    assert done.stdout.splitlines()[0] == (
        f"ddptui: attached read-only to pid {launcher.pid} ({shown}): "
        f"rank 0 of world size 1 on {socket.gethostname()}"
    ), done.stdout
    assert not any(line.startswith(("env = ", "subprocess.run")) for line in done.stdout.splitlines())


def views(*stacks: list[Frame] | None, cpu: float = 0.0) -> list[RankView]:
    """RankViews of ranks 0..N-1 with these stacks (innermost first), all idle."""
    job = ("", "127.0.0.1", "29500")
    return [
        RankView(
            RankProcess(rank, rank, len(stacks), 100 + rank, "h", job, psutil.Process()),
            cpu,
            False,
            None if frames is None else tuple(frames),
        )
        for rank, frames in enumerate(stacks)
    ]


def test_verdicts_from_stacks_alone() -> None:
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"

    def waiting(op: str, line: int) -> list[Frame]:
        return [Frame(c10d, 1, op), Frame("/job/train.py", line, "main")]

    assert verdict(views(waiting("all_reduce", 10), waiting("broadcast", 14), waiting("all_reduce", 10))) == (
        "deadlock: ranks 0,2 wait in all_reduce (train.py:10); rank 1 waits in broadcast (train.py:14)"
    )
    assert verdict(views(waiting("all_reduce", 10), waiting("all_reduce", 10)), missing=[2, 3]) == (
        "hang: ranks 0-1 wait in all_reduce (train.py:10); ranks 2-3 were not found here"
    )
    assert verdict(views(waiting("barrier", 5), waiting("barrier", 5))).startswith(
        "no hang seen: ranks 0-1 wait in barrier (train.py:5)"
    )
    assert verdict(views([Frame("/job/train.py", 3, "main")], None)) == (
        "no hang seen: no rank waits in a collective"
    )


def test_py_spy_output_and_errors() -> None:
    dump = (
        '[{"os_thread_id": 7, "thread_name": "gloo", "frames": []},'
        ' {"os_thread_id": 5, "thread_name": "MainThread", "frames": ['
        '{"name": "f.<locals>.g", "filename": "/job/a.py", "line": 3},'
        ' {"name": "<module>", "filename": "/job/a.py", "line": 9}]}]'
    )
    assert parse_dump(dump, 5) == [Frame("/job/a.py", 3, "g"), Frame("/job/a.py", 9, "<module>")]
    assert dump_problem("Permission Denied: Try running again with elevated permissions") == NOT_PERMITTED
    assert dump_problem("Error: Failed to find python version from target process\n\nStack backtrace:") == (
        "py-spy failed: Failed to find python version from target process"
    )
