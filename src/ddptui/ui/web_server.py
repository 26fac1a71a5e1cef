"""`ddptui serve [ID]`: a detached session in the browser, served by textual-serve.

Each tab that opens the page gets a process of its own, `ddptui join --web ID` (`web_relay`),
which joins the session as a watching client; the session is the only app. A fresh random token,
printed once in the URL, is required by the page (`/?token=T`) and by the tab's websocket
(`/ws/T`): without it a request gets 403, an empty body, and no process is started. Serving
stops on Ctrl+C, SIGTERM or SIGHUP, or when the session ends; every relay it started is ended
then, and the session runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import secrets
import shlex
import signal
import socket
import sys
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
import psutil
from aiohttp import web
from textual_serve.server import Server

from ddptui.core.detach.places import Entry
from ddptui.core.detach.start import DetachError

ENDED_POLL = 0.5
"""Seconds between two looks at whether the session still runs."""
RELAY_TIMEOUT = 5.0
"""Seconds the relays have to leave after SIGTERM before they are killed."""
SHUTDOWN_TIMEOUT = 3.0
"""Seconds open connections have to close when serving stops."""


class ServeError(DetachError):
    """Serving cannot start (the port is taken, the host cannot be bound); one line."""


def relay_command(session: str) -> str:
    """The shell command textual-serve runs for each tab (`exec`: the relay is its process)."""
    return "exec " + shlex.join([sys.executable, "-m", "ddptui", "join", "--web", session])


class SessionServer(Server):
    """textual-serve's server for one session, behind a token."""

    def __init__(self, entry: Entry, host: str, port: int, token: str | None = None) -> None:
        super().__init__(relay_command(entry.id), host=host, port=port, title=f"ddptui session {entry.id}")
        self.entry = entry
        self.token = token or secrets.token_urlsafe(24)

    @property
    def url(self) -> str:
        """The page's address, token included, as a user on this machine opens it."""
        host = socket.gethostname() if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/?token={self.token}"

    def admits(self, given: str) -> bool:
        """True for the token, compared in constant time."""
        return hmac.compare_digest(given.encode(errors="replace"), self.token.encode())

    async def _make_app(self) -> web.Application:
        """The page, the tab's websocket and the page's scripts (no downloads: ddptui makes none)."""
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self._index),
                web.get("/ws/{token}", self._websocket),
                web.static("/static", self.statics_path),
            ]
        )
        return app

    async def _index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, its websocket URL carrying the token; 403 without the token."""
        if not self.admits(request.query.get("token", "")):
            return web.Response(status=403)
        scheme = "wss" if request.secure else "ws"
        context: dict[str, Any] = {
            "font_size": 16,
            "app_websocket_url": f"{scheme}://{request.host}/ws/{self.token}",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        """A tab's connection: its relay is started only for the token, from this server's page."""
        origin = request.headers.get("Origin")
        if not self.admits(request.match_info["token"]) or (
            origin is not None and urlsplit(origin).netloc != request.host
        ):
            return web.Response(status=403)
        return await self.handle_websocket(request)

    async def run(self) -> str:
        """Serve until a signal or the session's end; why serving stopped (ServeError: it cannot
        start)."""
        runner = web.AppRunner(await self._make_app(), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
        await runner.setup()
        why = ""
        try:
            try:
                await web.TCPSite(runner, self.host, self.port).start()
            except OSError as exc:
                raise ServeError(
                    f"cannot serve on {self.host}:{self.port}: {_why(exc)} "
                    "(another port: --port, another address: --host)"
                ) from None
            print(
                f"ddptui: session {self.entry.id} in the browser: {self.url}  "
                "(Ctrl+C stops serving; the session runs on)",
                flush=True,
            )
            why = await self._until_stopped()
            return why
        finally:
            await _end_relays(grace=RELAY_TIMEOUT if why else 0)  # an ended session's: their summary
            await runner.cleanup()
            await _end_relays()  # any a tab started while the server closed

    async def _until_stopped(self) -> str:
        """Wait for SIGINT, SIGTERM, SIGHUP or the session's end; why serving stops."""
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future[str] = loop.create_future()

        def stop(why: str) -> None:
            if not stopped.done():
                stopped.set_result(why)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop, "")
        while not stopped.done():
            if not self.entry.alive():
                stop(f"session {self.entry.id} has ended: no longer serving it")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(stopped), ENDED_POLL)
        return stopped.result()


def _why(exc: OSError) -> str:
    """Why a bind failed, without asyncio's wording around it."""
    if exc.errno and exc.errno > 0 and not isinstance(exc, socket.gaierror):
        return os.strerror(exc.errno)
    return exc.strerror or str(exc)


async def _end_relays(grace: float = 0) -> None:
    """End every relay this process started: those still running after `grace` seconds get
    SIGTERM, and SIGKILL after RELAY_TIMEOUT more."""
    relays = psutil.Process().children(recursive=True)
    await _gone(relays, grace)
    for process in relays:
        if _runs(process):
            with contextlib.suppress(psutil.Error):
                process.terminate()
    await _gone(relays, RELAY_TIMEOUT)
    for process in relays:
        if _runs(process):
            with contextlib.suppress(psutil.Error):
                process.kill()


async def _gone(processes: list[psutil.Process], timeout: float) -> None:
    """Wait (at most `timeout` seconds) until none of `processes` runs.

    asyncio reaps them (each is its subprocess): this waits until they are gone, never reaps.
    """
    deadline = asyncio.get_running_loop().time() + timeout
    while any(_runs(process) for process in processes) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


def _runs(process: psutil.Process) -> bool:
    """True while the process has not exited."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def serve(entry: Entry, host: str, port: int) -> str:
    """Serve the session until Ctrl+C or its end (ServeError: cannot); what to say at the end."""
    return asyncio.run(SessionServer(entry, host, port).run())
