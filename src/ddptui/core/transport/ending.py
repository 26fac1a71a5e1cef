"""Finding and ending a session's processes, only those provably its own (ddptui and its watchdog).

A process counts as the session's when it is a live rank (psutil pins it by its start time, so a
reused pid is never mistaken for it), descends from one, or carries the session's directory in
its environment (which a stranger that reused a dead rank's pid does not).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterable

import psutil

from ddptui.rank import tempdirs
from ddptui.rank.protocol import STATE_DIR_ENV


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie (psutil compares the start time, so a reused pid is not alive)."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _marked(process: psutil.Process, state_dir: str) -> bool:
    """True when the process carries the session's directory in its environment."""
    try:
        return bool(process.environ().get(STATE_DIR_ENV) == state_dir)
    except psutil.Error:
        return False


def session_processes(
    ranks: Iterable[psutil.Process], state_dir: str, everyone: bool
) -> list[psutil.Process]:
    """The live processes of a session: live ranks, their descendants, and marked processes.

    Marked processes are looked for among this process's adopted children, or, with `everyone`
    (the watchdog, after ddptui died and its orphans went to init), among all processes.
    """
    found: dict[int, psutil.Process] = {}
    roots = [p for p in ranks if _alive(p)]
    candidates = psutil.process_iter() if everyone else _children(psutil.Process())
    roots += [p for p in candidates if p.pid != os.getpid() and _marked(p, state_dir)]
    for root in roots:
        found[root.pid] = root
        with contextlib.suppress(psutil.Error):
            for child in root.children(recursive=True):
                found.setdefault(child.pid, child)
    return [p for p in found.values() if _alive(p)]


def _children(process: psutil.Process) -> list[psutil.Process]:
    """Direct children, or none if the process is gone."""
    try:
        children: list[psutil.Process] = process.children()
    except psutil.Error:
        return []
    return children


def signal_all(processes: Iterable[psutil.Process], sig: int) -> None:
    """Signal each process that is still the one we know (psutil checks for pid reuse)."""
    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):
            process.send_signal(sig)


def kill_all(find: Callable[[], list[psutil.Process]], deadline: float = 3.0) -> None:
    """SIGKILL what `find` returns until nothing is left (bounded: a few seconds at most)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        victims = find()
        if not victims:
            return
        signal_all(victims, signal.SIGKILL)
        time.sleep(0.02)


def remove_tempdirs(state_dir: str) -> None:
    """Remove the multiprocessing folders (`pymp-*`) the session's ranks listed as made.

    Only what a rank listed right after `mkdtemp` made it (so the folder is provably its own),
    named `pymp-*`, a real folder and this user's: a rank ended by a signal never removes its own.
    """
    with contextlib.suppress(OSError):
        for name in os.listdir(state_dir):
            if name.startswith(tempdirs.LISTING):
                with open(os.path.join(state_dir, name)) as listing:
                    for path in listing.read().splitlines():
                        _remove_tempdir(path)


def _remove_tempdir(path: str) -> None:
    """Remove one listed folder if it still looks like the one the rank made."""
    with contextlib.suppress(OSError):
        held = os.lstat(path)
        if (
            os.path.basename(path).startswith("pymp-")
            and stat.S_ISDIR(held.st_mode)
            and held.st_uid == os.getuid()
        ):
            shutil.rmtree(path, ignore_errors=True)
