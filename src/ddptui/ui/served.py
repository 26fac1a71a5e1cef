"""The app a detached session runs (`ddptui --detach`), as its host sees it (`detach.start.App`).

The session process runs it on its own pty; the clients that join are shown that pty.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Size

from ddptui.core.commands.context import Context
from ddptui.ui.app import DdptuiApp

STOP_TIMEOUT = 30.0
"""Seconds the app has to end (its ranks are ended first) before the session goes on without it."""


CLEAR = "\x1b[H\x1b[2J"


class ServedDriver(LinuxDriver):
    """Textual's terminal driver, which clears the whole terminal before the app's first frame at a
    new size.

    The clear goes in the app's own output, after every frame drawn at the old size: a watching
    terminal larger than the app then keeps nothing of a larger frame, whenever it was written.
    """

    def __init__(self, app: App[Any], **options: Any) -> None:
        super().__init__(app, **options)
        self.served = app
        self.drawn: Size | None = None
        """The size of the screen the last frame was drawn at."""

    def write(self, data: str) -> None:
        screens = self.served.screen_stack
        size = screens[-1].size if screens else None
        if size:
            if self.drawn is not None and size != self.drawn:
                data = CLEAR + data
                self.served.call_later(self.served.refresh, repaint=True, layout=True)  # all of it
            self.drawn = size
        super().write(data)


class ServedApp:
    """`DdptuiApp` on a session's `Context`, run and ended by the session process."""

    def __init__(self, ctx: Context) -> None:
        self.app = DdptuiApp(ctx.session, context=ctx)
        self.app.driver_class = ServedDriver
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
