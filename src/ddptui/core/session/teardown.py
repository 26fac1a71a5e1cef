"""Ending a session: its ranks (or, on other nodes, leaving them be), its launcher, its files.

`Session.close` and `Session.kill_now` are these functions; they are apart from the running
session's code because nothing else in it is about the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol, TypeVar

from ddptui.core.session import wrap
from ddptui.core.session.rank import Rank
from ddptui.core.session.reports import keep_reports
from ddptui.core.session.resources import Resources
from ddptui.core.transport.ending import remove_tempdirs
from ddptui.core.transport.interface import RequestError
from ddptui.core.transport.launch import LaunchSpec
from ddptui.core.transport.logs import SessionLog
from ddptui.rank.asks import Ask, SaveCollectives

R = TypeVar("R")


class Ending(Protocol):
    """What ending a session needs of it (`Session` is one)."""

    spec: LaunchSpec
    ranks: list[Rank]
    resources: Resources
    on_closing: list[Callable[[], None]]
    on_release: list[Callable[[SessionLog], None]]

    @property
    def launcher(self) -> wrap.Launcher | None:
        """Wrap mode: the job's launcher."""

    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets`."""

    def ask(
        self, ask: Ask[R], targets: Iterable[int], timeout: float = 2.0
    ) -> Awaitable[dict[int, R | RequestError]]:
        """Ask every target rank at once."""

    def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> Awaitable[bool]:
        """Wait until `condition()` holds; False if `timeout` passed first."""


RELEASED = {"continue": "left running, undebugged", "exit": "left to exit: --on-disconnect exit"}
"""How a rank on another node is left when the session ends, per `--on-disconnect`."""


async def close(session: Ending, grace: float = 0.5) -> None:
    """End every rank and everything it started, then remove the session's files."""
    held = session.resources
    if held.closing:
        return
    held.closing = True
    for hook in session.on_closing:
        hook()
    for task in held.tasks:
        task.cancel()
    if held.log is not None:  # the ranks about to be ended leave their collectives for the logs
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
    if held.job is not None:
        if session.launcher is not None and session.launcher.alive:
            grace = max(grace, wrap.LAUNCHER_GRACE)
        await asyncio.to_thread(held.job.end, grace)
        here = [rank.index for rank in session.ranks if not wrap.remote(rank)]
        await session.wait_until(lambda: not session.live(here), 2.0)
    if held.server is not None:
        await held.server.close()
    _close_terminals(session)
    await asyncio.to_thread(_release, session)


def kill_now(session: Ending) -> None:
    """Synchronous last resort when the event loop is gone: kill everything, remove files."""
    held = session.resources
    if held.closing and held.job is None:
        return
    held.closing = True
    if held.job is not None:
        held.job.end(0.0)
    with contextlib.suppress(RuntimeError):  # the loop may be closed already
        _close_terminals(session)
    _release(session)


def _close_terminals(session: Ending) -> None:
    """Stop reading every rank's terminal and close it."""
    if session.resources.job is not None:
        for transport in session.resources.job.ranks:
            transport.close()


def _release(session: Ending) -> None:
    """Stop the watchdog, keep the reports, remove the session's files, close the logs (blocking)."""
    held = session.resources
    if held.log is not None:
        for keep in session.on_release:
            keep(held.log)
        keep_reports(held.log, session.ranks, held.dir)
    if held.job is not None:
        held.job.release()
        held.job = None
    if held.dir:
        remove_tempdirs(held.dir)  # the ranks are gone: their pymp-* folders are not in use
        shutil.rmtree(held.dir, ignore_errors=True)
    if held.log is not None:
        held.log.close()
        held.log = None
