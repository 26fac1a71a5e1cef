"""`Resources`: what a session opens as it starts and must close at its end.

The session's private directory, its link server, its rank processes (`LocalJob`), its
`--log-dir` log and its background tasks, held in one place that the helpers which start, watch
and end a session (`Arrivals`, `Watchdog`, `teardown`) are handed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from ddptui.core.transport.channel import ChannelServer
from ddptui.core.transport.local import LocalJob
from ddptui.core.transport.logs import SessionLog


@dataclass
class Resources:
    """A session's directory, link server, job, log and tasks; `closing` once its end began."""

    dir: str = ""
    """The session's private directory (0700): socket, stack dumps."""
    server: ChannelServer | None = None
    job: LocalJob | None = None
    log: SessionLog | None = None
    closing: bool = False
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a background coroutine the session owns (cancelled as it closes)."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
