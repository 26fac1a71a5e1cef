"""What a session leaves in `--log-dir` as it ends, besides each rank's output: the files the
tools people already use read (torchrun's error files, Flight Recorder dumps); each rank's collective
log is the diagnosis's to keep (`on_release`)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable

from ddptui.core.session.rank import Rank
from ddptui.core.transport.logs import SessionLog


def error_file(rank: Rank) -> bytes:
    """A torchrun error file (`TORCHELASTIC_ERROR_FILE`, as `@record` writes it) for a failed rank."""
    crash, state = rank.state.crash, rank.state
    message = f"{crash.type}: {crash.message}" if crash else state.describe()
    stack = "".join(f'  File "{f.file}", line {f.line}, in {f.func}\n' for f in rank.crash_frames)
    callstack = f"Traceback (most recent call last):\n{stack}{message}\n" if stack else message
    when = int(time.time() - (time.monotonic() - (rank.failed_at or time.monotonic())))
    info = {"py_callstack": callstack, "timestamp": str(when)}
    return json.dumps({"message": {"message": message, "extraInfo": info}}, indent=2).encode()


def keep_reports(log: SessionLog, ranks: Iterable[Rank], state_dir: str) -> None:
    """Into --log-dir: a torchrun-style `error-N.json` per failed rank, and the Flight Recorder
    dumps the ranks left (torchfrtrace reads `fr_trace_rank_N`)."""
    for rank in ranks:
        if rank.failed_at is not None:
            log.keep(f"error-{rank.index}.json", error_file(rank))
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir(state_dir)):
            if name.startswith("fr_trace_rank_"):
                with open(os.path.join(state_dir, name), "rb") as trace:
                    log.keep(name, trace.read())
