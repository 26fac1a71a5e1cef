"""`torch.multiprocessing.spawn` under ddptui: its workers become ranks, or a rank may not start any.

In a job ddptui wraps (`ddptui -- python train.py`), the launcher's `start_processes` notes how
many workers it starts (`SPAWN_NPROCS_ENV`, inherited by them) and each worker's `_wrap` notes
its index, so a worker that stops or crashes before `init_process_group` still knows which rank
it will be; its function runs guarded, so an uncaught exception opens post-mortem in the worker
itself (mp.spawn would only pass a traceback's text to the parent, as `ProcessRaisedException`).

In a rank ddptui spawned itself (`ddptui train.py`), a script that calls `mp.spawn` starts a
second set of ranks inside each rank: they would fight over the rendezvous port, and their
breakpoints would read /dev/null. `refuse_in_rank` stops that at the call, with `StartsRanks`
sent so the core can say how to run the script instead.

Standard library only: torch is reached when it is imported, never imported here.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from ddptui.rank.hooks import when_imported

SPAWN = "torch.multiprocessing.spawn"
LAUNCHER = "torch.multiprocessing.spawn"
"""How the launcher is named to the user."""
SPAWN_NPROCS_ENV = "DDPTUI_SPAWN_NPROCS"
"""Environment variable: how many workers the `mp.spawn` that started this process started."""

index: int | None = None
"""This worker's index in its `mp.spawn`, once `_wrap` runs (None elsewhere)."""


def install_for_wrapped(on_crash: Callable[[BaseException], None], on_start: Callable[[Any], None]) -> None:
    """In a wrapped job: count the workers `mp.spawn` starts and guard each worker's function
    (`on_start(fn)` just before it runs)."""
    when_imported(SPAWN, lambda module: _patch(module, _counting, _guarding(on_crash, on_start)))


def refuse_in_rank(send: Callable[[Any], None], message: Any) -> None:
    """In a rank ddptui spawned: `mp.spawn` sends `message`, says why on stderr and exits 1."""

    def refuse(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def start_processes(*args: Any, **kwargs: Any) -> Any:
            send(message)
            print(
                f"ddptui: this script starts its own ranks ({LAUNCHER}); ddptui stopped it here",
                file=sys.stderr,
            )
            raise SystemExit(1)

        return start_processes

    when_imported(SPAWN, lambda module: _patch(module, refuse, None))


def _patch(module: Any, start: Callable[..., Any], wrap: Callable[..., Any] | None) -> None:
    """Wrap the module's `start_processes` (which `spawn` calls by name) and its `_wrap`."""
    if getattr(module.start_processes, "__ddptui__", False):
        return
    module.start_processes = start(module.start_processes)
    module.start_processes.__ddptui__ = True
    if wrap is not None and hasattr(module, "_wrap"):
        # Keeps `_wrap`'s name: mp pickles the process target by name, and the worker's own copy
        # of this module (patched the same way when the worker imports it) is what runs.
        module._wrap = wrap(module._wrap)


def _counting(original: Callable[..., Any]) -> Callable[..., Any]:
    """`start_processes` that tells the workers how many of them there are."""

    @functools.wraps(original)
    def start_processes(fn: Any, args: Any = (), nprocs: int = 1, *rest: Any, **kwargs: Any) -> Any:
        os.environ[SPAWN_NPROCS_ENV] = str(nprocs)
        return original(fn, args, nprocs, *rest, **kwargs)

    return start_processes


def _guarding(
    on_crash: Callable[[BaseException], None], on_start: Callable[[Any], None]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A factory for `_wrap`s that note the worker's index and run its function guarded."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def _wrap(fn: Any, i: int, *rest: Any, **kwargs: Any) -> Any:
            global index
            index = i
            on_start(fn)
            return original(functools.partial(_guarded, fn, on_crash), i, *rest, **kwargs)

        return _wrap

    return wrap


def _guarded(fn: Callable[..., Any], on_crash: Callable[[BaseException], None], *args: Any) -> Any:
    """Run a worker's function; an uncaught error gets `on_crash` (post-mortem) before mp sees it."""
    try:
        return fn(*args)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        on_crash(exc)
        raise


def spawned_nprocs() -> int | None:
    """How many workers this process's `mp.spawn` started, if it is such a worker."""
    value = os.environ.get(SPAWN_NPROCS_ENV, "")
    return int(value) if index is not None and value.isdigit() else None
