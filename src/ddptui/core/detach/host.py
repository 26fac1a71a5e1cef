"""The session process's side of the socket: clients join, their lines run one at a time.

A detached session runs the app on a pty of its own (`Screen`) with a `Front` the ddptui
command gives it. A client that watches (`Watch`) is sent what the app draws and types into it,
as tmux's clients do; the pty takes the smallest of their sizes. A `--batch` client's lines run
on the same `Context` as `--batch` runs them: one transcript (`batch.wired`) whose stream
(`Relay`) goes to the client whose line runs, lines from every client in one queue, in arrival
order. A client that leaves leaves the ranks as they are. The session ends at `:quit` (a
client's line, or the app's), at a client's `Kill`, when every rank has ended and no terminal
shows the app, when the terminal that started it goes away without leaving it (its `owner`), on
SIGTERM or SIGINT, or after `--detached-timeout` seconds with no client joined; every client
still connected is then sent `Ended` with the summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import signal
import socket
import sys
from collections.abc import Awaitable
from typing import Protocol, TextIO, cast

from ddptui.core.commands import batch
from ddptui.core.commands.context import Context
from ddptui.core.detach import wire
from ddptui.core.detach.relay import Joined, Relay
from ddptui.core.detach.screen import Screen
from ddptui.core.model.targets import format_ranks

MAX_BACKLOG = 16 << 20
"""Bytes of screen a watching client may leave unread before it is let go."""
OWNER_TIMEOUT = 30.0
"""Seconds the terminal that started a session has to join it."""
HELLO_TIMEOUT = 5.0
"""Seconds a new connection has to say hello before it is dropped."""
DRAIN_TIMEOUT = 5.0
"""Seconds the last messages have to reach the clients as the session ends."""

_Item = tuple[Joined, str] | None  # a client's line, or None: the job ended by itself


class Front(Protocol):
    """The app the session runs on its pty, as the host sees it."""

    def redraw(self) -> None:
        """Draw the whole screen again (a client began watching)."""

    def summary(self) -> list[str]:
        """The summary to print as the session ends, as the app prints it."""

    async def stop(self) -> None:
        """End the app (the session ends), once its ranks are ended; returns when it has."""


class Host:
    """A session served on a unix socket to the clients that present its token."""

    def __init__(
        self,
        ctx: Context,
        session_id: str,
        token: str,
        detached_timeout: float | None = None,
        collapse: bool = True,
    ) -> None:
        self.ctx = ctx
        self.session_id = session_id
        self._token = token.encode()
        self.detached_timeout = detached_timeout
        self.relay = Relay()
        self.transcript = batch.wired(ctx, cast(TextIO, self.relay), collapse)
        self.clients: dict[Joined, asyncio.StreamWriter] = {}
        self.joined: set[Joined] = set()
        """Clients that sent a line: while there is none, `--detached-timeout` counts down."""
        self._lines: asyncio.Queue[_Item] = asyncio.Queue()
        self._ending = asyncio.Event()
        self._ender: Joined | None = None
        self.why = ""
        """Why the session ended (for its log)."""
        self._timer: asyncio.TimerHandle | None = None
        self.screen: Screen | None = None
        self.front: Front | None = None
        self.watchers: dict[Joined, tuple[int, int]] = {}
        """The clients shown the app, with their terminal's size."""
        self._typist: Joined | None = None
        """The watcher that typed last: Ctrl+D detaches it."""
        self._unwatched = asyncio.Event()
        """Set while no terminal shows the app."""
        self._unwatched.set()
        self.owner: Joined | None = None
        """The terminal that started the session, until it detaches: its going away ends it."""
        self._owned: asyncio.TimerHandle | None = None

    def show(self, screen: Screen, front: Front) -> None:
        """Serve the app that runs on `screen` to the clients that watch."""
        self.screen, self.front = screen, front
        screen.start(self._screen_output)

    def await_owner(self) -> None:
        """A session started in a terminal (`ddptui SCRIPT`): end it unless that terminal watches
        within `OWNER_TIMEOUT` (the command that started it may have died meanwhile)."""
        why = f"the terminal that started it did not join within {OWNER_TIMEOUT:g} s"
        self._owned = asyncio.get_running_loop().call_later(OWNER_TIMEOUT, self.end, None, why)

    def leave(self) -> bool:
        """Detach the watcher that typed last (Ctrl+D in the app); False when none watches."""
        client = self._typist if self._typist in self.watchers else next(iter(self.watchers), None)
        if client is None:
            return False
        if client is self.owner:
            self.owner = None  # detached: the session no longer ends with that terminal
        client.send(wire.Leave())
        self._unwatch(client)
        return True

    async def serve(self, listening: socket.socket) -> int:
        """Serve clients until the session ends; returns the exit status `--batch` would give."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.end, None, f"ended by {signal.Signals(sig).name}")
        loop.add_signal_handler(signal.SIGHUP, lambda: None)  # no terminal: a stray hangup ends nothing
        server = await asyncio.start_unix_server(self._client, sock=listening, limit=wire.MAX_LINE)
        tasks = [asyncio.create_task(self._work()), asyncio.create_task(self._watch_job())]
        self._idle_changed()
        try:
            await self._ending.wait()
        finally:
            server.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return await self._finish()

    def end(self, client: Joined | None, why: str) -> None:
        """End the session (once): `client`, if any, is sent what the last of the job prints."""
        if self._ending.is_set():
            return
        self._ender, self.why = client, why
        self._ending.set()

    def report(self) -> tuple[str, ...]:
        """Each state the ranks are in, with the ranks in it: `0-3: paused at train.py:9`."""
        by_state: dict[str, set[int]] = {}
        for rank in self.ctx.session.ranks:
            by_state.setdefault(rank.state.describe(), set()).add(rank.index)
        return tuple(f"{format_ranks(ranks)}: {state}" for state, ranks in by_state.items())

    # -- lines --------------------------------------------------------------------------------
    async def _work(self) -> None:
        """Run the clients' lines one at a time, as `--batch` runs its file's."""
        session = self.ctx.session
        await session.arrivals.wait_started()
        await session.wait_settled()
        batch.report_early_deaths(session)
        while (item := await self._lines.get()) is not None:
            client, text = item
            self.relay.to(client)
            self.transcript.flush()  # what the ranks printed since the last line
            go_on = await batch.run_line(self.ctx, text, self.transcript)
            self.transcript.say_unsent()
            self.transcript.flush()
            if not go_on or batch.all_gone(session):
                self.end(client, "quit" if not go_on else "the job ended")
                return
            client.send(wire.Done())
            self.relay.to(None)
        self.end(None, "the job ended")

    async def _watch_job(self) -> None:
        """Once every rank has ended, end the session after the lines already queued; while a
        terminal shows the app, it shows how the job ended until its user quits or leaves."""
        session = self.ctx.session
        await session.wait_until(lambda: batch.all_gone(session))
        await self._unwatched.wait()
        self._lines.put_nowait(None)

    async def _finish(self) -> int:
        """End every rank, send the last of the transcript to the client that ended the session,
        and `Ended` to every client."""
        ctx = self.ctx
        self.relay.to(self._ender)
        await ctx.findings.settle()
        await ctx.session.close()
        if self.front is not None:
            await self.front.stop()
        if self.screen is not None:
            self.screen.drain(self._screen_output)  # the app's last frame and its leaving
            self.screen.stop()
        self.transcript.flush()
        summary = tuple(self.front.summary() if self.front is not None else ctx.findings.summary())
        status = batch.final_status(ctx)
        for line in summary:
            print(line, file=sys.stderr)  # the session's log
        ended = wire.Ended(summary, status)
        for client in list(self.clients):
            client.send(ended)
        await self._drain_all()
        return status

    async def _drain_all(self) -> None:
        """Let the last messages reach the clients (bounded), then close their connections."""
        writers = list(self.clients.values())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(DRAIN_TIMEOUT):
                await asyncio.gather(*(_quietly(writer.drain()) for writer in writers))
        for writer in writers:
            writer.close()

    # -- clients ------------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: its hello, then its messages until it leaves."""
        client = Joined(writer.write)
        try:
            if await self._greet(reader, client):
                self.clients[client] = writer
                await self._messages(reader, client)
        except (OSError, ValueError, TimeoutError, asyncio.IncompleteReadError):
            pass  # a client gone, a line past MAX_LINE, no hello in time: the connection ends
        finally:
            client.gone = True
            self.clients.pop(client, None)
            if client is self.owner:
                self.end(None, "the terminal that started it went away")
            self._unwatch(client)
            self.joined.discard(client)
            self._idle_changed()
            writer.close()

    async def _greet(self, reader: asyncio.StreamReader, client: Joined) -> bool:
        """True for a hello with the token and this version; a wrong token is sent nothing."""
        async with asyncio.timeout(HELLO_TIMEOUT):
            line = await reader.readline()
        try:
            hello = wire.decode(line)
        except wire.WireError:
            return False
        if not isinstance(hello, wire.Hello):
            return False
        if not hmac.compare_digest(hello.token.encode(errors="replace"), self._token):
            return False
        if hello.version != wire.VERSION:
            client.send(wire.Refused(f"session speaks protocol {wire.VERSION}, not {hello.version}"))
            return False
        client.send(wire.Welcome(self.session_id))
        return True

    async def _messages(self, reader: asyncio.StreamReader, client: Joined) -> None:
        """A joined client's messages, until it says bye or its connection ends."""
        while line := await reader.readline():
            try:
                message = wire.decode(line)
            except wire.WireError as exc:
                client.send(wire.Refused(str(exc)))
                continue
            if isinstance(message, wire.Line):
                self.joined.add(client)
                self._idle_changed()
                self._lines.put_nowait((client, message.text))
            elif isinstance(message, wire.Status):
                client.send(wire.Report(self.report(), len(self.watchers)))
            elif isinstance(message, wire.Kill):
                self.end(client, "killed by ddptui kill")
            elif isinstance(message, wire.Bye):
                return
            else:
                self._watching(client, message)

    # -- watchers -----------------------------------------------------------------------------
    def _watching(self, client: Joined, message: wire.Message) -> None:
        """A message of a client that shows the app: start watching, keys, a new size."""
        screen, front = self.screen, self.front
        if screen is None or front is None:
            client.send(wire.Refused("this session shows no app"))
        elif isinstance(message, wire.Watch):
            if message.owner and self._owned is not None:
                self._owned.cancel()
                self._owned, self.owner = None, client
            self.joined.add(client)
            self._idle_changed()
            self.watchers[client] = (message.columns, message.lines)
            self._unwatched.clear()
            if not self._fit():
                front.redraw()
        elif isinstance(message, wire.Size) and client in self.watchers:
            self.watchers[client] = (message.columns, message.lines)
            self._fit()
        elif isinstance(message, wire.Keys) and client in self.watchers:
            try:
                data = wire.decode_bytes(message.data)
            except wire.WireError as exc:
                client.send(wire.Refused(str(exc)))
                return
            self._typist = client
            screen.write(data)

    def _unwatch(self, client: Joined) -> None:
        """The client no longer watches: the others may have room for a larger app."""
        if self.watchers.pop(client, None) is not None:
            if not self.watchers:
                self._unwatched.set()
            self.joined.discard(client)
            self._idle_changed()
            self._fit()

    def _fit(self) -> bool:
        """Size the app to the smallest watching terminal; False when its size stays."""
        if self.screen is None or not self.watchers:
            return False
        columns = min(size[0] for size in self.watchers.values())
        lines = min(size[1] for size in self.watchers.values())
        return self.screen.resize(columns, lines)  # the app clears the terminal for its new size

    def _screen_output(self, data: bytes) -> None:
        """What the app wrote, to every watcher."""
        if not self.watchers:
            return
        message = wire.Screen(wire.encode_bytes(data))
        for client in list(self.watchers):
            writer = self.clients.get(client)
            if writer is not None and writer.transport.get_write_buffer_size() > MAX_BACKLOG:
                self._unwatch(client)  # it does not read what it is sent: let it go
                writer.close()
            else:
                client.send(message)

    def _idle_changed(self) -> None:
        """Start `--detached-timeout`'s count when the last client left, stop it when one joins."""
        if self.detached_timeout is None or self._ending.is_set():
            return
        if self.joined:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        elif self._timer is None:
            why = f"no client joined for {self.detached_timeout:g} s (--detached-timeout)"
            self._timer = asyncio.get_running_loop().call_later(self.detached_timeout, self.end, None, why)


async def _quietly(waiting: Awaitable[None]) -> None:
    """Await, taking a connection's end as the end of the wait."""
    with contextlib.suppress(OSError):
        await waiting
