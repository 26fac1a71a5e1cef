"""The app a detached session runs (`ddptui --detach`), as its host sees it (`detach.start.App`).

The session process runs it on its own pty; the clients that join are shown that pty.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ddptui.core.commands.context import Context
from ddptui.ui.app import DdptuiApp

STOP_TIMEOUT = 30.0
"""Seconds the app has to end (its ranks are ended first) before the session goes on without it."""


class ServedApp:
    """`DdptuiApp` on a session's `Context`, run and ended by the session process."""

    def __init__(self, ctx: Context) -> None:
        self.app = DdptuiApp(ctx.session, context=ctx)
        self._done = asyncio.Event()

    async def run(self, leave: Callable[[], bool]) -> None:
        """Run until the app ends; Ctrl+D and `:detach` call `leave`."""
        self.app.context.leave = leave
        try:
            await self.app.run_async()
        finally:
            self._done.set()

    async def started(self) -> str:
        """Once the job started: "", or why it could not."""
        stopped = asyncio.ensure_future(self._done.wait())
        waiting = asyncio.ensure_future(self.app.started.wait())
        await asyncio.wait((stopped, waiting), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if self.app.launch_error:
            return self.app.launch_error
        return "" if self.app.started.is_set() else "the app ended before the job started"

    def summary(self) -> list[str]:
        """The summary as the app prints it when it ends (grouped past a screenful of ranks)."""
        return self.app.summary()

    def redraw(self) -> None:
        """Draw the whole screen again, for a client that began watching."""
        self.app.refresh(repaint=True, layout=True)

    async def stop(self) -> None:
        """End the app (it ends its ranks as it unmounts) and wait until it has."""
        if self.app.is_running:
            self.app.exit()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), STOP_TIMEOUT)
