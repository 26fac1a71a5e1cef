"""Whatever ends ddptui, every rank and every process a rank started is gone within 3 seconds."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from conftest import EXAMPLES, SCRIPTS, Runner, wait_for


def start(ddptui: Runner, script: str, ready_lines: int, *options: str) -> subprocess.Popen[str]:
    """Start a batch session on stdin and wait until it printed `ready_lines` rank lines."""
    proc = ddptui.popen("--nproc-per-node", "2", "--stall-timeout", "1", "--batch", "-", *options, script)
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 60
    while seen < ready_lines and time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"ddptui ended early: {proc.communicate()}"
        seen += line.startswith("[rank ")
    return proc


def assert_all_gone(ddptui: Runner, proc: subprocess.Popen[str]) -> None:
    """Everything ends within 3 s of ddptui being told to stop, and no file is left behind."""
    assert wait_for(lambda: not ddptui.leftovers(), timeout=3.0), [p.cmdline() for p in ddptui.leftovers()]
    proc.wait(timeout=5)
    assert ddptui.leftover_files() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_signal_ends_ranks_in_pdb_and_their_children(ddptui: Runner, sig: signal.Signals) -> None:
    proc = start(ddptui, str(SCRIPTS / "children.py"), ready_lines=4)
    # 2 ranks, each with a forked worker and a `sleep` subprocess
    assert len([p for p in ddptui.leftovers() if p.name() == "sleep"]) == 2
    proc.send_signal(sig)
    assert_all_gone(ddptui, proc)
    if sig != signal.SIGKILL:
        assert proc.returncode == 128 + sig
        out, err = proc.communicate(timeout=5)
        assert "Traceback" not in err
        assert "rank 1: paused at tests/scripts/children.py:20 (ended by ddptui)" in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_ends_ranks_blocked_in_a_collective(ddptui: Runner, sig: signal.Signals) -> None:
    proc = start(ddptui, str(EXAMPLES / "rank0_set_trace.py"), ready_lines=2)
    assert wait_for(lambda: len(ddptui.leftovers()) >= 3, timeout=10)
    proc.send_signal(sig)
    assert_all_gone(ddptui, proc)


def test_quit_command_ends_everything(ddptui: Runner) -> None:
    proc = start(ddptui, str(SCRIPTS / "children.py"), ready_lines=4)
    out, _ = proc.communicate(":quit\n", timeout=10)
    assert_all_gone(ddptui, proc)
    assert "rank 0: paused at tests/scripts/children.py:20 (ended by ddptui)" in out
    assert proc.returncode == 1


def test_end_of_input_ends_ranks_that_never_stop(ddptui: Runner) -> None:
    ddptui.env["CHILDREN_BLOCK"] = "1"
    started = time.monotonic()
    result = ddptui.batch(SCRIPTS / "children.py", "", stall=1, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert "rank 1: waiting at tests/scripts/children.py:18 (ended by ddptui)" in result.stdout
    assert ddptui.leftover_files() == []
