"""Ending a session: its ranks (or, on other nodes, leaving them be), its launcher, its files.

`Session.close` and `Session.kill_now` are these functions; they are apart from the running
session's code because nothing else in it is about the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from typing import TYPE_CHECKING

from ddptui.core.session import wrap
from ddptui.core.session.reports import keep_reports
from ddptui.rank.asks import SaveCollectives

if TYPE_CHECKING:
    from ddptui.core.session.session import Session

RELEASED = {"continue": "left running, undebugged", "exit": "left to exit: --on-disconnect exit"}
"""How a rank on another node is left when the session ends, per `--on-disconnect`."""


async def close(session: Session, grace: float = 0.5) -> None:
    """End every rank and everything it started, then remove the session's files."""
    if session._closing:
        return
    session._closing = True
    session.verdicts.cancel()
    for task in [*session._tasks, *session._reports]:
        task.cancel()
    if session._log is not None:  # the ranks about to be ended leave their collectives for the logs
        linked = [r.index for r in session.live(range(len(session.ranks))) if r.transport.linked]
        await session.ask(SaveCollectives(), linked, 3.0)
    released = RELEASED[session.spec.on_disconnect]
    for rank in session.ranks:
        if wrap.remote(rank):
            rank.release(released)
        else:
            rank.ending()
    if session.launcher is not None:
        session.launcher.ending()
    if session._job is not None:
        if session.launcher is not None and session.launcher.alive:
            grace = max(grace, wrap.LAUNCHER_GRACE)
        await asyncio.to_thread(session._job.end, grace)
        here = [rank.index for rank in session.ranks if not wrap.remote(rank)]
        await session.wait_until(lambda: not session.live(here), 2.0)
    if session._server is not None:
        await session._server.close()
    _close_terminals(session)
    await asyncio.to_thread(_release, session)


def kill_now(session: Session) -> None:
    """Synchronous last resort when the event loop is gone: kill everything, remove files."""
    if session._closing and session._job is None:
        return
    session._closing = True
    if session._job is not None:
        session._job.end(0.0)
    with contextlib.suppress(RuntimeError):  # the loop may be closed already
        _close_terminals(session)
    _release(session)


def _close_terminals(session: Session) -> None:
    """Stop reading every rank's terminal and close it."""
    if session._job is not None:
        for transport in session._job.ranks:
            transport.close()


def _release(session: Session) -> None:
    """Stop the watchdog, keep the reports, remove the session's files, close the logs (blocking)."""
    if session._log is not None:
        keep_reports(session._log, session.ranks, session.verdicts.raw, session._dir)
    if session._job is not None:
        session._job.release()
        session._job = None
    if session._dir:
        shutil.rmtree(session._dir, ignore_errors=True)
    if session._log is not None:
        session._log.close()
        session._log = None
