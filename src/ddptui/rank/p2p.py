"""Point-to-point ops as records: `send`, `recv`, `isend`, `irecv`, and each `P2POp` of a
`batch_isend_irecv` (what torch's pipelining issues).

Standard library only: torch is reached through `sys.modules`, never imported. On gloo the Flight
Recorder keeps no point-to-point op at all, so these wrappers go in whether it is on or not, and
`ddptui.rank.collectives.collective_log` merges their records with the collectives by time.

A record names its `peer` as a global rank (None for a recv from any rank until it completes),
its `direction` (`send` or `recv`), its `tag`, and a `seq` counted per (group, peer, direction,
tag): gloo pairs the k-th send from rank a to rank b on a group and tag with b's k-th recv from
a, so the core pairs the records the same way. Async work on gloo has no future (`getFuture` is
not implemented for its sends and receives): an `isend` or `irecv` is `started` while the user
waits on its work (`Work.wait` is wrapped), `completed` once that returns or once the work says
so when the log is read; a work dropped unwaited stays `issued`.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import itertools
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ddptui.rank import op_records
from ddptui.rank.hooks import C10D
from ddptui.rank.op_records import RING, caller_site, dtype_name, group_name

OPS = {"send": "send", "isend": "send", "recv": "recv", "irecv": "recv"}
"""The wrapped functions, each with its direction."""
PEERS = {"send": ("dst", "group_dst"), "recv": ("src", "group_src")}
"""Per direction, the arguments naming the peer: as a global rank, and as a rank of the group."""
BLOCKING = frozenset({"send", "recv"})
BATCH = "batch_isend_irecv"
WAIT = "Work.wait"
"""Where the original `Work.wait` is kept among the originals."""
DONE = frozenset({"completed", "failed"})

Watched = tuple[list[dict[str, Any]], Any]
"""The records of one async work, and its group (to name the sender of a recv from any rank)."""

_log: collections.deque[dict[str, Any]] = collections.deque(maxlen=RING)
_counters: collections.defaultdict[tuple[str, int, str, int], Iterator[int]] = collections.defaultdict(
    functools.partial(itertools.count, 1)
)
"""A counter per channel: (group, peer, direction, tag). `next()` of a C iterator made by a C
callable takes no lock and cannot be interleaved (a Lock costs ten times as much)."""
_originals: dict[str, Any] = {}
_work_class: list[Any] = []
"""The `Work` class whose `wait` is wrapped (none, or one)."""
_works: weakref.WeakKeyDictionary[Any, Watched] = weakref.WeakKeyDictionary()
"""Async work not yet known to be done."""
_inside = threading.local()
"""`call` is True on a thread while a wrapped function runs: `send` runs `isend`, and
`batch_isend_irecv` runs each op's function; one user call, one record per op."""


def p2p_log() -> list[dict[str, Any]]:
    """This rank's point-to-point records, oldest first, copied (a state may change meanwhile)."""
    with contextlib.suppress(Exception):  # the weak dict may shrink under a collection
        for work, watched in list(_works.items()):
            if work.is_completed():
                _done(work, watched)
    return [dict(record) for record in _log]


def forget() -> None:
    """Drop every record and count (tests and benchmarks)."""
    _log.clear()
    _counters.clear()
    _works.clear()


# -- installing ----------------------------------------------------------------------------------


def install(module: Any = None) -> bool:
    """Wrap the point-to-point functions of `torch.distributed` (or of `module`, a `distributed_c10d`
    being imported) and `Work.wait`; idempotent. True when the wrappers are in place.

    The package's names are replaced too: `P2POp(dist.isend, ...)` must hold the very function
    `batch_isend_irecv` and the pipelining schedules compare with `is` and `==`.
    """
    c10d = module if module is not None else sys.modules.get(C10D)
    if c10d is None:
        return False
    for name in (*OPS, BATCH):
        original = getattr(c10d, name, None)
        if original is None or name in _originals:
            continue
        wrapper = _wrap_batch(original) if name == BATCH else _wrap_op(name, original)
        op_records.replace(c10d, name, original, wrapper, _originals)
    _wrap_wait(getattr(c10d, "Work", None))
    return bool(_originals)


def uninstall() -> None:
    """Put the original functions back, where a wrapper still stands."""
    op_records.restore(_originals)
    if _work_class and WAIT in _originals:
        _work_class[0].wait = _originals[WAIT]
    _work_class.clear()
    _originals.clear()


def _wrap_op(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (`send`, `recv`, `isend`, `irecv`) recording each call before it runs."""
    names = list(inspect.signature(original).parameters)
    direction = OPS[name]
    peer_arg, group_peer_arg = PEERS[direction]

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "call", False):
            return original(*args, **kwargs)
        call = dict(zip(names, args, strict=False), **kwargs)
        group = call.get("group")
        record = _issue(
            name, direction, call.get("tensor"), call.get(peer_arg), call.get(group_peer_arg), group,
            call.get("tag") or 0, sys._getframe(1),
        )  # fmt: skip
        _inside.call = True
        try:
            result = original(*args, **kwargs)
        except BaseException:
            record["state"] = "failed"
            raise
        finally:
            _inside.call = False
        if name in BLOCKING:
            _returned(record, result)
        elif result is not None and record:
            _watch(result, [record], group)
        return result

    return wrapper


def _wrap_batch(original: Callable[..., Any]) -> Callable[..., Any]:
    """`batch_isend_irecv` recording each of its `P2POp`s, each completed by its own work."""

    @functools.wraps(original)
    def wrapper(p2p_op_list: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "call", False):
            return original(p2p_op_list, *args, **kwargs)
        records = _batch_records(p2p_op_list, sys._getframe(1))
        _inside.call = True
        try:
            works = original(p2p_op_list, *args, **kwargs)
        except BaseException:
            _set_state(records, "failed")
            raise
        finally:
            _inside.call = False
        _watch_batch(works, records, getattr(p2p_op_list[0], "group", None) if records else None)
        return works

    return wrapper


def _wrap_wait(work_class: Any) -> None:
    """Wrap `work_class.wait`: a recorded async op is `started` while waited on, then `completed`.

    Work that no op of ours issued goes straight through after one lookup.
    """
    original = getattr(work_class, "wait", None)
    if original is None or WAIT in _originals:
        return

    @functools.wraps(original)
    def wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        watched = _works.get(self) if _works else None
        if watched is None:
            return original(self, *args, **kwargs)
        _set_state(watched[0], "started")
        try:
            result = original(self, *args, **kwargs)
        except BaseException:
            _set_state(watched[0], "failed")
            raise
        _done(self, watched)
        return result

    _originals[WAIT] = original
    _work_class.append(work_class)
    work_class.wait = wait


# -- records ------------------------------------------------------------------------------------


def _issue(
    op: str, direction: str, tensor: Any, peer: Any, group_peer: Any, group: Any, tag: int, caller: Any
) -> dict[str, Any]:
    """Append the record of an op about to run; a failure here yields a detached record."""
    try:
        if peer is None and group_peer is not None:
            peer = _global_rank(group, group_peer)
        record = _new_record(op, direction, tensor, None if peer is None else int(peer), group, tag)
        record["site"] = caller_site(caller)
    except Exception:
        return {}
    _log.append(record)
    return record


def _new_record(
    op: str, direction: str, tensor: Any, peer: int | None, group: Any, tag: int
) -> dict[str, Any]:
    """The record of one op, numbered on its channel (a recv from any rank once it completes)."""
    pg, desc = group_name(group)
    return {
        "seq": 0 if peer is None else _count(pg, peer, direction, tag),
        "op": op,
        "raw_op": op,
        "pg": pg,
        "pg_desc": desc,
        "shapes": [] if tensor is None else [list(tensor.shape)],
        "dtypes": [] if tensor is None else [dtype_name(tensor.dtype)],
        "out_shapes": [],
        "out_dtypes": [],
        "state": "issued",
        "p2p": True,
        "peer": peer,
        "direction": direction,
        "tag": int(tag),
        "site": None,
        "source": "wrappers",
        "time_ns": time.time_ns(),
    }


def _batch_records(ops: Any, caller: Any) -> list[dict[str, Any]]:
    """The records of a batch's `P2POp`s (their `peer` is a global rank already)."""
    records = []
    with contextlib.suppress(Exception):  # a malformed list is torch's to refuse
        for op in ops:
            name = getattr(op.op, "__name__", "")
            if name in OPS:
                record = _issue(name, OPS[name], op.tensor, op.peer, None, op.group, op.tag or 0, caller)
                record["raw_op"] = BATCH
                records.append(record)
    return records


def _count(pg: str, peer: int, direction: str, tag: int) -> int:
    """The next number on one channel."""
    return next(_counters[(pg, peer, direction, tag)])


def _global_rank(group: Any, group_rank: Any) -> int:
    """A rank of `group` as a global rank."""
    c10d = sys.modules[C10D]
    if group is None or group is getattr(getattr(c10d, "GroupMember", None), "WORLD", None):
        return int(group_rank)
    return int(c10d.get_global_rank(group, group_rank))


def _name_sender(record: dict[str, Any], sender: int) -> None:
    """Give a recv from any rank its sender and its number on that channel, now that it is known."""
    if record.get("peer") is None and record.get("direction") == "recv" and sender >= 0:
        record["peer"] = sender
        record["seq"] = _count(record["pg"], sender, "recv", record["tag"])


def _returned(record: dict[str, Any], result: Any) -> None:
    """A blocking op came back: completed; `recv` returned its sender."""
    record["state"] = "completed"
    if isinstance(result, int) and record:
        _name_sender(record, result)


def _watch(work: Any, records: list[dict[str, Any]], group: Any) -> None:
    """Remember the async `work` the `records` complete with (try, not `suppress`: this runs per op)."""
    try:  # noqa: SIM105 (suppress() costs a context manager per op)
        _works[work] = (records, group)
    except TypeError:  # not weakly referenceable: its records stay `issued`
        pass


def _watch_batch(works: Any, records: list[dict[str, Any]], group: Any) -> None:
    """Pair a batch's works with its records; coalesced backends return one work for them all."""
    if not isinstance(works, list) or not works:
        return
    records = [record for record in records if record]
    if len(works) == len(records):
        for work, record in zip(works, records, strict=True):
            _watch(work, [record], group)
    elif records:
        _watch(works[-1], records, group)


def _set_state(records: Iterable[dict[str, Any]], state: str) -> None:
    """Move records not done yet to `state`."""
    for record in records:
        if record.get("state") not in DONE:
            record["state"] = state


def _done(work: Any, watched: Watched) -> None:
    """Async work finished: its records are completed; a recv from any rank learns its sender."""
    records, group = watched
    try:  # noqa: SIM105 (as in _watch)
        del _works[work]
    except (KeyError, TypeError):
        pass
    unnamed = False
    for record in records:
        if record["state"] not in DONE:
            record["state"] = "completed"
        unnamed = unnamed or record["peer"] is None
    if unnamed:
        with contextlib.suppress(Exception):
            sender = _global_rank(group, work._source_rank())
            for record in records:
                _name_sender(record, sender)
