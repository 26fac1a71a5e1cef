"""torchrun's options on ddptui's command line: honoured where one machine needs them, else torchrun.

A single-node job ddptui launches itself takes what it can use (`--rdzv-endpoint` as the master
address, `--rdzv-id` as the run id, `--role`); the rest only matters to torchrun's agent and is
accepted as a no-op. A job ddptui cannot launch itself — several nodes, or `--no-python` — runs
through torchrun in wrap mode instead, with the same options: torchrun stays in charge and its
workers connect to ddptui.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import sys
from collections.abc import Sequence
from typing import Any

_STRINGS = (
    ("--rdzv-backend", "--rdzv_backend", "rendezvous backend (torchrun's; single-node: ignored)"),
    ("--rdzv-endpoint", "--rdzv_endpoint", "HOST[:PORT] of the rendezvous (single-node: the master address)"),
    ("--rdzv-id", "--rdzv_id", "the job's id (TORCHELASTIC_RUN_ID)"),
    ("--rdzv-conf", "--rdzv_conf", "rendezvous settings (torchrun's; single-node: ignored)"),
    ("--start-method", "--start_method", "torchrun's; ignored for scripts"),
    ("--local-ranks-filter", "--local_ranks_filter", "torchrun's; every rank has its pane anyway"),
    ("--local-addr", "--local_addr", "torchrun's; single-node: ignored"),
    ("--redirects", None, "torchrun's; every rank has its own terminal anyway"),
    ("--tee", None, "torchrun's; every rank has its own terminal anyway"),
    ("--role", None, "ROLE_NAME of every rank (default: default)"),
)
_FLAGS = (
    ("--no-python", "--no_python", "run SCRIPT as an executable (through torchrun, in wrap mode)"),
    ("--run-path", "--run_path", "accepted: ddptui always runs a script with runpy.run_path"),
)


def nproc_per_node(text: str) -> int:
    """`--nproc-per-node` as torchrun reads it: a number, `cpu` (the CPU count), `gpu` (the GPUs),
    or `auto` (the GPUs if there are any, else the CPUs). GPUs are counted without importing
    torch: `CUDA_VISIBLE_DEVICES` when set, else the NVIDIA driver's list."""
    with contextlib.suppress(ValueError):
        return int(text)
    if text not in ("cpu", "gpu", "auto"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number, auto, cpu or gpu")
    gpus = visible_gpus()
    if text == "gpu" and not gpus:
        raise argparse.ArgumentTypeError("gpu: this machine has no visible NVIDIA GPU (use a number, or cpu)")
    return gpus if text == "gpu" or (text == "auto" and gpus) else os.cpu_count() or 1


def visible_gpus() -> int:
    """How many NVIDIA GPUs a rank would see: `CUDA_VISIBLE_DEVICES` (CUDA stops reading it at
    the first invalid entry, such as `-1`), else the driver's devices."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return len(glob.glob("/proc/driver/nvidia/gpus/*"))
    devices = [device.strip() for device in visible.split(",")]
    return next((i for i, device in enumerate(devices) if not device or device.startswith("-")), len(devices))


LAUNCH_OPTIONS = frozenset(
    {"--nproc-per-node", "--nproc_per_node", "--nnodes", "--node-rank", "--node_rank", "--master-addr"}
    | {"--master_addr", "--master-port", "--master_port", "--standalone", "--max-restarts", "--max_restarts"}
    | {"--monitor-interval", "--monitor_interval"}
    | {name for spelling in _STRINGS + _FLAGS for name in spelling[:2] if name}
)
"""Options that say how to launch the job: the launcher's business in wrap mode."""


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add torchrun's options that ddptui's parser does not define itself, under both spellings."""
    for long, underscore, text in _STRINGS:
        names = [long, underscore] if underscore else [long]
        parser.add_argument(*names, default=None, metavar="VALUE", help=text)
    for long, underscore, text in _FLAGS:
        parser.add_argument(long, underscore, action="store_true", help=text)
    parser.add_argument("--max-restarts", "--max_restarts", type=int, default=0, metavar="N", help="only 0")
    parser.add_argument(
        "--monitor-interval", "--monitor_interval", type=float, default=None, metavar="S", help="ignored"
    )


def launch_options_given(tokens: Sequence[str]) -> list[str]:
    """The launch options among `tokens` (ddptui's own options before `--`)."""
    return [token.split("=", 1)[0] for token in tokens if token.split("=", 1)[0] in LAUNCH_OPTIONS]


def needs_torchrun(options: argparse.Namespace) -> bool:
    """True for a job ddptui cannot launch itself: several nodes, or an executable (`--no-python`)."""
    return options.nnodes not in ("1", "1:1") or options.node_rank != 0 or options.no_python


def master(options: argparse.Namespace) -> tuple[str, int | None]:
    """The master address and port of a single-node job: `--rdzv-endpoint` unless --master-* say."""
    addr, port = options.master_addr, options.master_port
    if options.rdzv_endpoint:
        host, _, endpoint_port = options.rdzv_endpoint.rpartition(":")
        if not host:
            host, endpoint_port = endpoint_port, ""
        if addr == "127.0.0.1":
            addr = host.strip("[]")
        if port is None and endpoint_port.isdigit():
            port = int(endpoint_port)
    return addr, port


def notes(options: argparse.Namespace) -> list[str]:
    """One line per torchrun option a single-node job launched by ddptui does not honour."""
    said = []
    if options.max_restarts:
        said.append(f"--max-restarts {options.max_restarts}: ddptui does not restart ranks")
    for name in ("redirects", "tee", "local_ranks_filter"):
        if getattr(options, name):
            said.append(f"--{name.replace('_', '-')}: ignored, every rank has its own terminal")
    return said


def wrapped_notes(options: argparse.Namespace) -> list[str]:
    """What to know when torchrun launches the job for ddptui (several nodes, `--no-python`)."""
    if options.nnodes in ("1", "1:1"):
        return []
    return [
        f"--nnodes {options.nnodes}: torchrun starts this node's ranks once the other nodes joined its"
        " rendezvous (run the job on each of them too); this ddptui shows this node's ranks only,"
        " `ddptui listen` shows every node's (docs/remote.md)"
    ]


def torchrun_command(options: argparse.Namespace) -> list[str]:
    """torchrun's command line for the same job, with the launch options the user gave."""
    command = [sys.executable, "-m", "torch.distributed.run"]
    given: dict[str, Any] = {
        "--nnodes": options.nnodes,
        "--nproc-per-node": options.nproc_per_node,
        "--node-rank": options.node_rank,
        "--master-addr": options.master_addr,
        "--master-port": options.master_port,
        "--max-restarts": options.max_restarts,
        "--monitor-interval": options.monitor_interval,
    }
    for long, _, _ in _STRINGS:
        given[long] = getattr(options, long[2:].replace("-", "_"))
    for name, value in given.items():
        if value is not None:
            command.append(f"{name}={value}")
    for long, _, _ in _FLAGS:
        if getattr(options, long[2:].replace("-", "_")):
            command.append(long)
    if options.standalone:
        command.append("--standalone")
    if options.module:
        command.append("-m")
    return [*command, options.script, *options.args]
