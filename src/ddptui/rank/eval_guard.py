"""Evaluations on some ranks only must not wait for the others: a collective an expression
issues (`x.full_tensor()` all-gathers a DTensor) whose group holds a rank that does not evaluate
it would wait for that rank forever, and gloo's wait takes no stop. So while such an evaluation
runs, every collective the main thread is about to issue is checked first (the points of
`:until-collective`, `until_points`), and one that would wait for a rank that is not evaluating
raises instead of running.

Standard library only; torch is reached through `sys.modules`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

from ddptui.rank import until_points
from ddptui.rank.hooks import C10D
from ddptui.rank.until_points import Call
from ddptui.rank.until_records import members, resolve_group


class Unpaired(RuntimeError):
    """A collective of an evaluation that would wait for ranks not evaluating: not run."""


@contextlib.contextmanager
def guarded(peers: tuple[int, ...]) -> Iterator[None]:
    """While the body runs, a collective whose group holds a rank not among `peers` (the ranks
    evaluating the same expression now) raises `Unpaired`. Nothing is armed when every rank of
    the job evaluates, when `peers` is not known (empty), while `:until-collective` has the
    points, or off the main thread: the points see the main thread's calls only, and there the
    program may be running beside the evaluation (its collectives are not the expression's)."""
    if (
        not _needed(peers)
        or until_points.armed()
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    evaluating = frozenset(peers)
    if not until_points.install(lambda call: _check(call, evaluating)):
        yield
        return
    try:
        yield
    finally:
        until_points.uninstall()


def _needed(peers: tuple[int, ...]) -> bool:
    """Whether some rank of the job is not among `peers`."""
    c10d = sys.modules.get(C10D)
    if not peers or c10d is None:
        return False
    try:
        return bool(c10d.is_initialized()) and len(set(peers)) < int(c10d.get_world_size())
    except Exception:
        return False


def _check(call: Call, evaluating: frozenset[int]) -> None:
    """Raise `Unpaired` for a collective whose group holds a rank that is not evaluating."""
    if call.point == "backward":
        return
    if call.point == "op":
        group = resolve_group(call.kwargs.get("group_name", call.args[-1] if call.args else None))
    else:
        group = call.args[0] if call.args else None
    ranks = members(group)
    if ranks is None:
        return
    missing = sorted(set(ranks) - evaluating)
    if missing:
        who = f"rank {missing[0]}" if len(missing) == 1 else f"ranks {','.join(map(str, missing))}"
        where = f"group [{','.join(map(str, ranks))}]"
        verb = "does" if len(missing) == 1 else "do"
        raise Unpaired(f"not run: {call.name} on {where} waits for {who}, which {verb} not evaluate it")
