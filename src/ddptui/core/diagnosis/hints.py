"""One-line advice for well-known DDP failures, read from what a rank printed when it failed.

Each `Hint` is one failure: a pattern over the rank's crash message or last output, and what to do.
The messages are torch 2.13's own (CPU build, gloo), found by running the failing scripts in
`tests/scripts/hint_*.py`. To add one: one `Hint` here, one captured message in
`tests/unit/test_hints.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddptui.core.session.rank import Rank

_TAIL = 64 * 1024
"""Characters read from the end of the text: the failure is at the end, and logs can be long."""


@dataclass(frozen=True)
class Hint:
    """A well-known failure: a pattern over a rank's output, and one line on what to do."""

    pattern: re.Pattern[str]
    """Matches the failure's message; its named groups may appear in `advice`."""
    advice: str
    """What to do, with `{group}` fields filled from the match (`--nproc-per-node {size}`)."""

    def advise(self, match: re.Match[str]) -> str:
        """The advice for one match of the pattern."""
        return self.advice.format_map(match.groupdict())


def _hint(pattern: str, advice: str) -> Hint:
    """A hint from a regular expression and its advice."""
    return Hint(re.compile(pattern), advice)


HINTS: tuple[Hint, ...] = (
    _hint(
        r"module 'torch\._C' has no attribute '_cuda_\w+'|Torch not compiled with CUDA enabled",
        'this torch has no CUDA: use device "cpu" and the "gloo" backend',
    ),
    _hint(
        r"Distributed package doesn't have NCCL built in",
        'no NCCL in this torch: use init_process_group(backend="gloo") on CPU',
    ),
    _hint(
        r"(?i)server socket has failed to listen on any local network address|EADDRINUSE"
        r"|address already in use",
        "the store port is taken: the script likely hard-codes MASTER_PORT; leave it to the"
        " environment (ddptui picks a free port) or pass --master-port",
    ),
    _hint(
        r"Expected to have finished reduction in the prior iteration",
        "a parameter got no gradient: pass find_unused_parameters=True to DistributedDataParallel,"
        " or use every parameter in forward",
    ),
    _hint(
        r"Default process group has not been initialized",
        "call dist.init_process_group() before any collective or DistributedDataParallel",
    ),
    _hint(
        r"waiting for clients\. (?P<joined>\d+)/(?P<size>\d+) clients joined",
        "only {joined} of {size} ranks joined: if the script hard-codes world_size={size},"
        " pass --nproc-per-node {size}",
    ),
    _hint(
        r"rank < size\. (?P<rank>\d+) vs (?P<size>\d+)",
        "rank {rank} is outside the script's world size {size}: it hard-codes world_size;"
        " pass --nproc-per-node {size}",
    ),
    _hint(
        r"DistributedDataParallel device_ids and output_device arguments only work with",
        "a CPU model takes no device_ids: DistributedDataParallel(model) without device_ids/output_device",
    ),
    _hint(
        r"Expected to mark a variable ready only once",
        "a parameter got its gradient twice in one backward (a module under several reentrant"
        " checkpoints, or a parameter used outside forward): checkpoint(..., use_reentrant=False),"
        " or DistributedDataParallel(..., static_graph=True)",
    ),
    _hint(
        r"insufficient shared memory \(shm\)|workers are out of shared memory",
        "DataLoader workers ran out of shared memory (/dev/shm): give it more room (in Docker,"
        " --shm-size=8g or --ipc=host) or use fewer num_workers",
    ),
    _hint(
        r"DataLoader worker \(pid \d+\) is killed by signal: Killed",
        "a DataLoader worker was killed (SIGKILL: often the out-of-memory killer): lower num_workers"
        " or the batch size; with num_workers=0 the loading runs in the rank itself",
    ),
)
"""Every known failure. When several match, the one mentioned last in the text wins."""


def hint_for(text: str) -> str | None:
    """The advice for the well-known failure mentioned last in `text`; None if there is none.

    Last: an output tail can hold an earlier, survived error, while the crash comes at the end;
    on a tie, the earlier entry of `HINTS`. Pass raw output or the exception message, not screen
    rows, which wrap messages mid-word.
    """
    tail = text[-_TAIL:]
    found = [
        (match.start(), hint.advise(match)) for hint in HINTS if (match := last_match(hint.pattern, tail))
    ]
    return max(found, key=lambda position_advice: position_advice[0])[1] if found else None


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of `pattern` in `text`."""
    match = None
    for match in pattern.finditer(text):  # noqa: B007 - the loop only walks to the last one
        pass
    return match


def rank_hint(rank: Rank) -> str | None:
    """Advice for a rank's well-known failure, read from its crash and its last output."""
    state = rank.state
    if state.crash is None and not (state.exit_code or 0):
        return None
    text = rank.output.tail(1 << 16).decode(errors="replace")
    return hint_for(text + ("\n" + state.crash.message if state.crash else ""))
