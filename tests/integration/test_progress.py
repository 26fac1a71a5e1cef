"""A job that mostly sleeps while its collectives complete is working: never called waiting or hung."""

from __future__ import annotations

import pytest
from conftest import SCRIPTS, Runner, summary


@pytest.mark.parametrize(("nproc", "seconds"), [(8, 12), (16, 8)])
def test_a_sleep_paced_collective_loop_gets_no_verdict(ddptui: Runner, nproc: int, seconds: int) -> None:
    ddptui.env["PACED_SECONDS"] = str(seconds)
    result = ddptui.batch(SCRIPTS / "paced.py", "", nproc=nproc, stall=2, timeout=150)
    assert "hang:" not in result.stdout and "waiting" not in result.stdout, result.stdout
    assert summary(result.stdout) == dict.fromkeys(range(nproc), "exited 0"), result.stdout
    assert result.returncode == 0
