"""The hint table on messages captured from torch 2.13 (CPU, gloo): one case per entry."""

from __future__ import annotations

import pytest

from ddptui.core.diagnosis.hints import HINTS, hint_for

NO_CUDA = 'use device "cpu" and the "gloo" backend'
PORT = "the script likely hard-codes MASTER_PORT"

CAPTURED = [
    ("AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'", NO_CUDA),
    ("AssertionError: Torch not compiled with CUDA enabled", NO_CUDA),
    ("RuntimeError: Distributed package doesn't have NCCL built in", 'init_process_group(backend="gloo")'),
    (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network"
        " address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
        PORT,
    ),
    ("OSError: [Errno 98] Address already in use", PORT),
    (
        "[rank0]: RuntimeError: Expected to have finished reduction in the prior iteration before starting"
        " a new one. This error indicates that your module has parameters that were not used in producing"
        " loss.",
        "pass find_unused_parameters=True to DistributedDataParallel, or use every parameter",
    ),
    (
        "ValueError: Default process group has not been initialized, please make sure to call"
        " init_process_group.",
        "call dist.init_process_group()",
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 7 seconds waiting for clients."
        " 1/2 clients joined.",
        "only 1 of 2 ranks joined: if the script hard-codes world_size=2, pass --nproc-per-node 2",
    ),
    (
        "RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/context.cc:23]"
        " rank < size. 3 vs 2",
        "rank 3 is outside the script's world size 2: it hard-codes world_size; pass --nproc-per-node 2",
    ),
    (
        "[rank0]: ValueError: DistributedDataParallel device_ids and output_device arguments only work"
        " with single-device/multiple-device GPU modules or CPU modules, but got device_ids [0],"
        " output_device None, and module parameters {device(type='cpu')}.",
        "a CPU model takes no device_ids",
    ),
    (
        "[rank0]: RuntimeError: Expected to mark a variable ready only once. This error is caused by one"
        " of the following reasons: 1) Use of a module parameter outside the `forward` function.",
        "checkpoint(..., use_reentrant=False)",
    ),
    (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared"
        " memory (shm).",
        "ran out of shared memory (/dev/shm)",
    ),
    (
        "RuntimeError: DataLoader worker (pid 23227) is killed by signal: Bus error. It is possible that"
        " dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
        "ran out of shared memory (/dev/shm)",
    ),
    (
        "RuntimeError: DataLoader worker (pid 23112) is killed by signal: Killed. ",
        "often the out-of-memory killer",
    ),
]


@pytest.mark.parametrize(("message", "advice"), CAPTURED)
def test_captured_message_gets_its_hint(message: str, advice: str) -> None:
    hint = hint_for(f"Traceback (most recent call last):\n  ...\n{message}\n")
    assert hint is not None and advice in hint


def test_every_entry_has_a_captured_message() -> None:
    matched = {i for i, hint in enumerate(HINTS) for message, _ in CAPTURED if hint.pattern.search(message)}
    assert matched == set(range(len(HINTS)))


def test_every_hint_is_one_line() -> None:
    assert all("\n" not in hint.advice for hint in HINTS)


def test_unknown_failures_get_no_hint() -> None:
    assert hint_for("") is None
    assert hint_for("NameError: name 'c' is not defined") is None
    assert hint_for("DistStoreError: wait timeout after 6000ms, keys: /default_pg/0//cpu//0/0") is None


def test_the_failure_mentioned_last_wins() -> None:
    text = "OSError: [Errno 98] Address already in use\nretrying\n"
    assert hint_for(text + "AssertionError: Torch not compiled with CUDA enabled") == (
        'this torch has no CUDA: use device "cpu" and the "gloo" backend'
    )
    timeouts = "waiting for clients. 1/2 clients joined.\n...\nwaiting for clients. 1/4 clients joined."
    assert hint_for(timeouts) == (
        "only 1 of 4 ranks joined: if the script hard-codes world_size=4, pass --nproc-per-node 4"
    )
