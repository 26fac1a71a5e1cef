"""How far this rank's collectives have got: a number that grows as they are issued and complete.

The stall watch asks it of a rank that looks idle: a job that mostly sleeps or waits on I/O while
its collectives advance is making progress, not hanging. Standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ddptui.rank import collectives
from ddptui.rank.hooks import C10D

C10D_C = "torch._C._distributed_c10d"
RECENT = 64
"""Records looked at where no Flight Recorder keeps count: enough to see the newest of each group."""


def collective_progress() -> int:
    """The collectives issued plus those completed, over every process group; 0 before any."""
    if C10D not in sys.modules:
        return 0
    counted = _from_flight_recorder()
    return counted if counted is not None else _from_records(collectives.collective_log(RECENT))


def _from_flight_recorder() -> int | None:
    """From the Flight Recorder's per-group status (no entries: a fraction of a millisecond)."""
    dump = getattr(sys.modules.get(C10D_C), "_dump_fr_trace_json", None)
    if dump is None:
        return None
    try:
        status: dict[str, Any] = json.loads(dump(False, True)).get("pg_status") or {}
    except Exception:
        return None
    keys = ("last_enqueued_collective", "last_completed_collective")
    total = sum(max(int(group.get(key, 0)), 0) for group in status.values() for key in keys)
    return total or None  # a recorder that records nothing (off): the records may


def _from_records(records: list[dict[str, Any]]) -> int:
    """From the newest records: the last sequence number issued and completed in each group."""
    issued: dict[tuple[str, bool], int] = {}
    completed: dict[tuple[str, bool], int] = {}
    for record in records:
        if not isinstance(record.get("seq"), int):
            continue
        group = (str(record.get("pg")), bool(record.get("p2p")))
        issued[group] = max(issued.get(group, 0), record["seq"])
        if record.get("state") == "completed":
            completed[group] = max(completed.get(group, 0), record["seq"])
    return sum(issued.values()) + sum(completed.values())
