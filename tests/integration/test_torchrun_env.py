"""A rank started by ddptui sees the environment torchrun gives a worker: checked against torchrun."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, SCRIPTS, Runner

AGENT_ONLY = {"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_SIGNALS_TO_HANDLE", "TORCHELASTIC_ERROR_FILE"}
"""What torchrun's agent sets for itself: it hosts the store, forwards signals and collects the
error files of `@record`. ddptui's ranks create their own store, and ddptui reads their errors."""
PER_RUN = {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"}
"""Set by both, to values of each run's own."""


def rank1_env(output: str) -> dict[str, str]:
    """The environment the script printed (the `ENV` line, with or without ddptui's rank tag)."""
    line = next(line for line in output.splitlines() if "ENV {" in line)
    return dict(json.loads(line.split("ENV ", 1)[1]))


def test_a_rank_gets_every_variable_torchrun_gives_a_worker(ddptui: Runner) -> None:
    env = {
        k: v for k, v in ddptui.env.items() if k not in ("OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING")
    }
    ddptui.env = env
    script = str(SCRIPTS / "env_dump.py")
    torchrun = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", script],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT, check=True,
    )  # fmt: skip
    result = ddptui.batch(script, "c\n")
    assert result.returncode == 0, result.stdout + result.stderr
    theirs, ours = rank1_env(torchrun.stdout), rank1_env(result.stdout)
    given = {key for key in theirs if key not in env} - AGENT_ONLY
    assert given <= set(ours), f"missing: {sorted(given - set(ours))}"
    assert {k: ours[k] for k in given - PER_RUN} == {k: theirs[k] for k in given - PER_RUN}
    assert ours["RANK"] == "1" and ours["OMP_NUM_THREADS"] == "1"
