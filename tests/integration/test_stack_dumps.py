"""A rank's stack dumps (faulthandler on SIGUSR1) never kill it: not while it exits either."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TIMEOUT = 30.0


def test_dumps_asked_for_while_a_rank_exits_do_not_kill_it(tmp_path: Path) -> None:
    """The core asks for a dump when a rank goes quiet, which may be as it exits. Python's
    finalization puts SIGUSR1's default action back: such a dump killed the rank (status -10)
    after its work was done. Here the dumps come every 10 ms until the rank is gone (without the
    fix, 9 ranks in 10 were killed so)."""
    script = tmp_path / "quick.py"
    ready = tmp_path / "ready"
    script.write_text(f"open({str(ready)!r}, 'w').close()\nimport time\ntime.sleep(0.2)\n")
    env = dict(os.environ, DDPTUI_DIR=str(tmp_path), DDPTUI_RANK="0", RANK="0")
    for name in ("DDPTUI_SOCKET", "DDPTUI_TOKEN", "PYTHONBREAKPOINT"):
        env.pop(name, None)
    for _ in range(5):
        ready.unlink(missing_ok=True)
        rank = subprocess.Popen([sys.executable, "-m", "ddptui.rank", str(script)], env=env)
        deadline = time.monotonic() + TIMEOUT
        try:
            while not ready.exists():  # the handler is in place once the script runs
                assert rank.poll() is None and time.monotonic() < deadline, "the rank never started"
                time.sleep(0.005)
            while rank.poll() is None:
                assert time.monotonic() < deadline, "the rank never exited"
                rank.send_signal(signal.SIGUSR1)
                time.sleep(0.01)
            assert rank.wait() == 0
        finally:
            rank.kill()
            rank.wait()
    assert "quick.py" in (tmp_path / "stack-0.txt").read_text()  # the dumps were answered meanwhile
