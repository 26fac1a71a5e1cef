"""The rank's end of the side channel: JSON lines over a unix socket named in the environment.

Why a socket and not text on the pty: "at the prompt" cannot be told reliably from terminal bytes
(typeahead, threads printing, user output that looks like a prompt). Every event is one JSON object
per line with an ``ev`` key; the core's decoder is `ddptui.core.channel`.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

SOCKET_ENV = "DDPTUI_SOCKET"
"""Environment variable holding the path of the core's unix socket."""

STATE_DIR_ENV = "DDPTUI_DIR"
"""Environment variable holding the session's private directory (stack dump files)."""

RANK_ENV = "DDPTUI_RANK"
"""Environment variable holding the global rank ddptui gave this process."""


class Channel:
    """A best-effort event sender; silent when no ddptui core is listening."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._sock: socket.socket | None = None
        self._pid = -1
        self._lock = threading.Lock()

    def send(self, ev: str, **fields: Any) -> None:
        """Send one event; never raises, because the debugged program must not die of the debugger."""
        if not self._path:
            return
        data = (json.dumps({"ev": ev, "pid": os.getpid(), **fields}) + "\n").encode()
        with self._lock:
            try:
                self._connected().sendall(data)
            except OSError:
                self._close()

    def _connected(self) -> socket.socket:
        """Return a socket connected in this process (a forked child reconnects on its own)."""
        if self._sock is None or self._pid != os.getpid():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.set_inheritable(False)
            sock.connect(self._path or "")
            self._sock, self._pid = sock, os.getpid()
        return self._sock

    def _close(self) -> None:
        """Forget a broken connection; the next event tries again."""
        if self._sock is not None and self._pid == os.getpid():
            self._sock.close()
        self._sock = None


channel = Channel(os.environ.get(SOCKET_ENV))
"""The process-wide channel (one per rank process)."""
