"""Whatever ends ddptui, every rank and every process a rank started is gone within 3 seconds."""

from __future__ import annotations

import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import EXAMPLES, ROOT, SCRIPTS, Runner, summary, tagged_ranks, wait_for

from ddptui.core.session.watchdog import ADOPT_EVERY
from ddptui.core.transport.local import direct_children


class Started:
    """A batch session in the background, its stdout collected line by line on a thread."""

    def __init__(self, ddptui: Runner, script: str, ready_lines: int) -> None:
        self.proc = ddptui.popen("--nproc-per-node", "2", "--stall-timeout", "1", "--batch", "-", script)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        while sum(len(tagged_ranks(line.split("] ")[0] + "]")) for line in self.seen) < ready_lines:
            if not self._take(timeout=60):
                raise AssertionError(f"ddptui ended before its ranks were ready: {self._ended()}")

    def _read(self) -> None:
        """Collect stdout until it closes."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _take(self, timeout: float) -> bool:
        """Move one line to `seen`; False at the end of output."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"ddptui printed nothing for {timeout} s; {self._ended()}") from None
        if line is not None:
            self.seen.append(line)
        return line is not None

    def _ended(self) -> str:
        """What the test can learn about a stuck or gone ddptui: its status and its stderr."""
        status = self.proc.poll()
        if status is None or self.proc.stderr is None:
            return f"still running; printed so far: {self.seen!r:.500}"
        return f"exited {status}; stderr: {self.proc.stderr.read()!r:.1000}"

    def output(self, stdin: str = "") -> str:
        """Send the rest of stdin, then everything ddptui printed until it exited."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdin)
        self.proc.stdin.close()
        while self._take(timeout=15):
            pass
        return "".join(self.seen)


def assert_all_gone(ddptui: Runner, proc: subprocess.Popen[str]) -> None:
    """Everything ends within 3 s of ddptui being told to stop, and no file is left behind."""
    assert wait_for(lambda: not ddptui.leftovers(), timeout=3.0), [p.cmdline() for p in ddptui.leftovers()]
    proc.wait(timeout=5)
    assert ddptui.leftover_files() == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_signal_ends_ranks_in_pdb_and_their_children(ddptui: Runner, sig: signal.Signals) -> None:
    started = Started(ddptui, str(SCRIPTS / "children.py"), ready_lines=4)
    proc = started.proc
    # 2 ranks, each with a forked worker and a `sleep` subprocess
    assert len([p for p in ddptui.leftovers() if p.name() == "sleep"]) == 2
    proc.send_signal(sig)
    assert_all_gone(ddptui, proc)
    if sig != signal.SIGKILL:
        assert proc.returncode == 128 + sig
        out = started.output()
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
        assert "rank 1: paused at tests/scripts/children.py:20 (ended by ddptui)" in out


@pytest.mark.parametrize("how", ["quit", "SIGTERM", "SIGKILL"])
def test_ranks_ended_leave_no_multiprocessing_folder_in_tmpdir(ddptui: Runner, how: str) -> None:
    """A rank killed never runs the finalizer that removes multiprocessing's `pymp-*` folder."""
    started = Started(ddptui, str(SCRIPTS / "mp_tempdir.py"), ready_lines=2)
    assert "tempdir made: True" in "".join(started.seen)
    if how == "quit":
        started.output(":quit\n")
    else:
        started.proc.send_signal(getattr(signal, how))
    assert_all_gone(ddptui, started.proc)


def test_a_second_signal_during_teardown_does_not_cut_it_short(ddptui: Runner) -> None:
    """`timeout` signals ddptui and then its process group: the second SIGTERM came while the
    first one's teardown waited for ranks to end, and cancelled it (no summary was printed)."""
    started = Started(ddptui, str(SCRIPTS / "slow_to_end.py"), ready_lines=4)
    proc = started.proc
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)  # into the teardown: the ranks ignore SIGTERM, so it waits out its grace
    proc.send_signal(signal.SIGTERM)
    assert_all_gone(ddptui, proc)
    assert proc.returncode == 128 + signal.SIGTERM
    out = started.output()
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    assert "rank 1: paused at tests/scripts/slow_to_end.py:8 (ended by ddptui)" in out, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_ends_ranks_blocked_in_a_collective(ddptui: Runner, sig: signal.Signals) -> None:
    proc = Started(ddptui, str(EXAMPLES / "rank0_set_trace.py"), ready_lines=2).proc
    assert wait_for(lambda: len(ddptui.leftovers()) >= 3, timeout=10)
    proc.send_signal(sig)
    assert_all_gone(ddptui, proc)


def test_quit_command_ends_everything(ddptui: Runner) -> None:
    started = Started(ddptui, str(SCRIPTS / "children.py"), ready_lines=4)
    proc = started.proc
    out = started.output(":quit\n")
    assert_all_gone(ddptui, proc)
    assert "rank 0: paused at tests/scripts/children.py:20 (ended by ddptui)" in out
    assert proc.returncode == 1


def test_a_rank_that_prints_as_it_is_ended_keeps_the_state_it_was_in(ddptui: Runner) -> None:
    """Its goodbye is output, which made a waiting rank `running` again: the summary said
    `running (ended by ddptui)` for ranks the user had seen waiting when they quit."""
    result = ddptui.batch(SCRIPTS / "says_goodbye.py", "", stall=1, timeout=60)
    assert "[ranks 0-1] cleaning up" in result.stdout, result.stdout
    assert summary(result.stdout) == {
        rank: "waiting at tests/scripts/says_goodbye.py:16 (ended by ddptui)" for rank in (0, 1)
    }


def test_end_of_input_ends_ranks_that_never_stop(ddptui: Runner) -> None:
    ddptui.env["CHILDREN_BLOCK"] = "1"
    started = time.monotonic()
    result = ddptui.batch(SCRIPTS / "children.py", "", stall=1, timeout=60)
    assert time.monotonic() - started < 30
    assert result.returncode == 1
    assert "rank 1: waiting at tests/scripts/children.py:18 (ended by ddptui)" in result.stdout
    assert ddptui.leftover_files() == []


@pytest.mark.parametrize("how", ["quit", "kill"])
def test_double_forked_daemons_are_ended(ddptui: Runner, how: str) -> None:
    started = Started(ddptui, str(SCRIPTS / "escapee.py"), ready_lines=4)
    daemons = [p for p in ddptui.leftovers() if "os.setsid()" in " ".join(p.cmdline())]
    assert len(daemons) == 2 and all(p.ppid() == started.proc.pid for p in daemons)  # adopted: subreaper
    if how == "quit":
        started.output(":quit\n")
    else:
        started.proc.send_signal(signal.SIGKILL)  # the watchdog finds them by the session's marker
    assert_all_gone(ddptui, started.proc)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
@pytest.mark.parametrize("how", ["quit", "kill"])
def test_a_stranger_that_reuses_a_dead_ranks_pid_is_never_signalled(how: str) -> None:
    """Inside a private PID namespace, so that nothing outside it can be touched."""
    result = subprocess.run(
        ["unshare", "-p", "-f", "--mount-proc", sys.executable, str(SCRIPTS / "pid_reuse.py"), how],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    if "Operation not permitted" in result.stderr:
        pytest.skip("no permission for a PID namespace here")
    assert result.stdout.strip() == "unharmed", result.stdout + result.stderr


def test_the_children_ddptui_takes_in_are_read_from_proc() -> None:
    """`LocalJob.adopt` looks at this process's direct children only (a few small reads)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in direct_children()
    finally:
        child.kill()
        child.wait()
    assert child.pid not in direct_children()


def test_ranks_end_and_are_reaped_on_a_kernel_without_pidfd_open(ddptui: Runner, tmp_path: Path) -> None:
    """Before Linux 5.3, or in a container whose seccomp profile forbids it, `os.pidfd_open` fails
    with ENOSYS or EPERM: ddptui then looks for its ranks' exits on a timer."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import errno, os\n\n"
        "def pidfd_open(pid, flags=0):\n"
        "    raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))\n\n"
        "os.pidfd_open = pidfd_open\n"
    )
    ddptui.env["PYTHONPATH"] = str(site)
    result = ddptui.batch(SCRIPTS / "steps.py", "c\n", nproc=2, timeout=60)
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}, result.stdout + result.stderr
    assert result.returncode == 0
    crashed = ddptui.batch(SCRIPTS / "dies_early.py", "", nproc=2, timeout=60)
    assert crashed.returncode != 0 and "Traceback" not in crashed.stderr, crashed.stderr
    assert not ddptui.leftovers()


def clean_daemons() -> list[psutil.Process]:
    """The daemons of escapee_clean.py (no environment: found by their command line)."""
    return [
        p for p in psutil.process_iter(["cmdline"]) if "# clean daemon" in " ".join(p.info["cmdline"] or ())
    ]


@pytest.mark.parametrize("how", ["eof", "term", "kill"])
def test_daemons_that_clear_their_environment_are_ended(ddptui: Runner, how: str) -> None:
    started = Started(ddptui, str(SCRIPTS / "escapee_clean.py"), ready_lines=4)
    assert wait_for(lambda: len(clean_daemons()) == 2, 10.0)
    assert all(p.ppid() == started.proc.pid for p in clean_daemons())  # adopted: ddptui is their subreaper
    if how == "kill":  # ddptui looks for adopted orphans once a second (ADOPT_EVERY) and tells its watchdog
        time.sleep(2 * ADOPT_EVERY)
        started.proc.send_signal(signal.SIGKILL)
    elif how == "term":
        started.proc.send_signal(signal.SIGTERM)
    else:
        assert started.proc.stdin is not None
        started.proc.stdin.close()
    assert wait_for(lambda: not clean_daemons(), 5.0), [p.cmdline() for p in clean_daemons()]
    assert_all_gone(ddptui, started.proc)
