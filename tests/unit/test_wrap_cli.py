"""Wrap mode on the command line: `--` before a command, torchrun's options, torchrun for several nodes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ddptui.cli import main
from ddptui.cli.options import UsageError, parse_spec
from ddptui.core.session.wrap import spawn_advice

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "examples" / "train_ddp.py")


def test_double_dash_before_a_command_is_wrap_mode() -> None:
    spec, options = parse_spec(
        ["--batch", "-", "--stall-timeout", "3", "--", sys.executable, "spawn.py", "--", "x"]
    )
    assert spec.command == (sys.executable, "spawn.py", "--", "x")
    assert (spec.nproc, spec.stall_timeout, options.batch) == (0, 3.0, "-")


def test_double_dash_after_the_script_belongs_to_the_script() -> None:
    spec, _ = parse_spec([SCRIPT, "--", "--lr", "1"])
    assert spec.command == () and spec.target == SCRIPT and spec.nproc == 2
    assert spec.args[-2:] == ("--lr", "1")


def test_double_dash_then_a_plain_python_file_is_the_old_form() -> None:
    spec, _ = parse_spec(["--nproc-per-node", "3", "--", SCRIPT])
    assert spec.command == () and spec.target == SCRIPT and spec.nproc == 3


def test_launch_options_go_after_the_double_dash() -> None:
    with pytest.raises(UsageError, match="--nproc_per_node is for the launcher"):
        parse_spec(["--nproc_per_node=2", "--", sys.executable, "x.py"])


def test_single_node_torchrun_options_are_honoured() -> None:
    argv = ["--nnodes=1", "--nproc_per_node=2", "--rdzv_id=101", "--rdzv_endpoint=localhost:2950"]
    spec, _ = parse_spec([*argv, "--rdzv-backend", "c10d", "--standalone", "--role", "trainer", SCRIPT])
    assert spec.command == ()
    assert (spec.nproc, spec.master_addr, spec.master_port, spec.run_id, spec.role) == (
        2,
        "localhost",
        2950,
        "101",
        "trainer",
    )


def test_several_nodes_run_through_torchrun_in_wrap_mode() -> None:
    argv = ["--nnodes", "2", "--node_rank", "1", "--nproc-per-node", "4", "--rdzv-endpoint", "head:29400"]
    spec, _ = parse_spec([*argv, "--rdzv-backend", "c10d", "--batch", "-", SCRIPT, "--lr", "1"])
    assert spec.command[:3] == (sys.executable, "-m", "torch.distributed.run")
    options = spec.command[3:-3]
    assert {"--nnodes=2", "--node-rank=1", "--nproc-per-node=4", "--rdzv-endpoint=head:29400"} <= set(options)
    assert "--rdzv-backend=c10d" in options
    assert spec.command[-3:] == (SCRIPT, "--lr", "1")


def test_several_nodes_say_that_the_job_waits_for_the_others(capsys: pytest.CaptureFixture[str]) -> None:
    unwritable = ["--log-dir", "/proc/no-such-dir"]  # an error after the notes: no job starts
    assert main(["--nnodes", "2", "--batch", "-", *unwritable, SCRIPT]) == 2
    (note, error) = capsys.readouterr().err.splitlines()
    assert note.startswith("ddptui: --nnodes 2: torchrun starts this node's ranks once the other nodes")
    assert "`ddptui listen` shows every node's" in note and error.startswith("ddptui: error: cannot write")
    assert main(["--nnodes", "1", "--batch", "-", *unwritable, SCRIPT]) == 2
    assert "--nnodes" not in capsys.readouterr().err


def test_no_python_runs_through_torchrun() -> None:
    spec, _ = parse_spec(["--no-python", "--nproc-per-node", "2", "/bin/true"])
    assert spec.command[-2:] == ("--no-python", "/bin/true")


def test_the_advice_names_the_command_to_run() -> None:
    spec, _ = parse_spec([SCRIPT, "29500"])
    advice = spawn_advice(spec, "torch.multiprocessing.spawn")
    assert advice.endswith(f"run it as  ddptui -- python {SCRIPT} 29500")


def test_scrollback_reaches_every_way_of_starting_a_job() -> None:
    from ddptui.cli.options import listen_spec

    assert parse_spec(["--scrollback", "100", SCRIPT])[0].scrollback == 100
    assert parse_spec(["--scrollback", "100", "--", sys.executable, "x.py"])[0].scrollback == 100
    assert listen_spec(["--scrollback", "100"])[0].scrollback == 100
    assert parse_spec([SCRIPT])[0].scrollback == 5000


def test_nproc_per_node_counts_cpus_and_gpus_as_torchrun_does(monkeypatch: pytest.MonkeyPatch) -> None:
    cpus = os.cpu_count() or 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert parse_spec(["--nproc-per-node", "cpu", SCRIPT])[0].nproc == cpus
    assert parse_spec(["--nproc_per_node=auto", SCRIPT])[0].nproc == cpus  # no GPU: the CPUs
    with pytest.raises(UsageError, match="no visible NVIDIA GPU"):
        parse_spec(["--nproc-per-node", "gpu", SCRIPT])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,3,5")
    assert parse_spec(["--nproc-per-node", "gpu", SCRIPT])[0].nproc == 3
    assert parse_spec(["--nproc-per-node", "auto", SCRIPT])[0].nproc == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,-1,0")  # CUDA stops at the first invalid entry
    assert parse_spec(["--nproc-per-node", "gpu", SCRIPT])[0].nproc == 1
    with pytest.raises(UsageError, match="'many' is not a number, auto, cpu or gpu"):
        parse_spec(["--nproc-per-node", "many", SCRIPT])
