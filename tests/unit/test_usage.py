"""`ProcessTable`: the process table the stall watch samples, read from /proc or through psutil."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
from conftest import wait_for

from ddptui.core.transport import usage


@pytest.fixture
def tree() -> Iterator[psutil.Process]:
    """A process with a child, both blocked in a sleep."""
    code = (
        "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); print(flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # the child is started
    parent = psutil.Process(proc.pid)
    asleep = lambda: all(  # noqa: E731  (past `print` and `exec` on a loaded machine too)
        p.status() == psutil.STATUS_SLEEPING for p in (parent, *parent.children())
    )
    try:
        assert wait_for(asleep, 30)
        yield parent
    finally:
        for process in psutil.Process(proc.pid).children(recursive=True):
            process.kill()
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/stat is Linux's")
def test_reading_proc_gives_what_psutil_gives(tree: psutil.Process, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = usage.ProcessTable()
    monkeypatch.setattr(usage, "PROC_SELF", "/no/such/file")  # the psutil way, as off Linux
    slow = usage.ProcessTable()
    (child,) = tree.children()
    assert fast.children[tree.pid] == slow.children[tree.pid] == [child.pid]
    for process in (tree, child):
        (cpu, active, started), (cpu_slow, active_slow, _) = fast.info[process.pid], slow.info[process.pid]
        assert (active, active_slow) == (False, False)  # blocked in a sleep
        assert cpu == pytest.approx(cpu_slow, abs=0.02)  # idle: the same clock ticks
        assert started == pytest.approx(process.create_time(), abs=0.01)  # what usage() checks
    assert fast.usage(tree) == pytest.approx(slow.usage(tree), abs=0.02)
    assert set(fast.info) & set(slow.info) >= {tree.pid, child.pid, psutil.Process().pid}
