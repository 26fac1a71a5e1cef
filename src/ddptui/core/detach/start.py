"""Start the job in a session process of its own: for `ddptui --detach`, which returns at once,
and for `ddptui SCRIPT` in a terminal, which then shows it (an `owned` session).

The command forks twice: the first child leaves the terminal's session (`setsid`), the second
(no session leader, so no terminal can become its own) is the session process. It runs the app
on a pty of its own (`Screen`: its standard input, output and error), serves it and the app's
`Context` on its socket (`Host`), and tells the command through a pipe that it is ready, or
why it could not start. Its log (`ID.log`) is `sys.stderr`. Whatever ends it, even SIGKILL,
ends every rank: the session's reaper (`transport.reaper`) sees its pipe close.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import select
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil

from ddptui.core.commands.context import Context
from ddptui.core.detach import places
from ddptui.core.detach.host import Front, Host
from ddptui.core.detach.screen import DEFAULT_SIZE, Screen
from ddptui.core.transport.launch import LaunchSpec

READY_TIMEOUT = 60.0
"""Seconds the command waits for the session process to say it is ready."""


class DetachError(Exception):
    """A session that could not be started detached; the message is one line."""


class App(Front, Protocol):
    """The app a session process runs (the ddptui command's, made by `Detached.app`)."""

    async def run(self, leave: Callable[[], bool]) -> None:
        """Run until the app ends; `leave` detaches the client that typed last (Ctrl+D)."""

    async def started(self) -> str:
        """Once the job started: "" , or why it could not (one line; the app has ended)."""


@dataclass(frozen=True)
class Detached:
    """What the session process is to run: the job, how to make its context and its app, and
    its options."""

    spec: LaunchSpec
    context: Callable[[LaunchSpec], Context]
    app: Callable[[Context], App]
    detached_timeout: float | None = None
    collapse: bool = True
    size: tuple[int, int] | os.terminal_size = DEFAULT_SIZE
    """The app's terminal size until a client watches (the starting terminal's)."""
    owned: bool = False
    """Started in a terminal that joins it at once (`ddptui SCRIPT`), and ends with that terminal
    unless it detaches."""


def detach(job: Detached) -> tuple[str, str]:
    """Start the session process; returns its id and what says how to reach it (DetachError)."""
    try:
        directory = places.checked_home(create=True)
    except places.PlaceError as exc:
        raise DetachError(str(exc)) from None
    session_id = places.new_id(directory)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        _session_process(job, session_id, write_end)
    os.close(write_end)
    os.waitpid(child, 0)
    said = _ready(read_end)
    if not said.startswith("ok"):
        raise DetachError(
            said or f"the session process ended while starting (see {directory / session_id}.log)"
        )
    listening = said.removeprefix("ok").strip()  # `ddptui listen --detach`: the line for the job
    ranks = (
        f"{job.spec.nproc} rank{'s' * (job.spec.nproc != 1)}" if job.spec.nproc else "ranks as they connect"
    )
    line = (
        f"ddptui: session {session_id} runs {script_of(job.spec)} ({ranks}) detached: "
        f"ddptui join {session_id} opens it, ddptui kill {session_id} ends it"
    )
    return session_id, f"{line}\n{listening}" if listening else line


def script_of(spec: LaunchSpec) -> str:
    """What the session runs, in a word: the script, or a wrapped command's script or program."""
    if spec.command:
        return next((word for word in spec.command if word.endswith(".py")), spec.command[0])
    if spec.listen is not None:
        return "ddptui listen"
    return spec.target


def _ready(read_end: int) -> str:
    """What the session process said through the pipe (empty if it said nothing in time)."""
    chunks = []
    deadline = time.monotonic() + READY_TIMEOUT
    with os.fdopen(read_end, "rb") as pipe:
        while (left := deadline - time.monotonic()) > 0 and select.select([pipe], [], [], left)[0]:
            chunk = os.read(pipe.fileno(), 4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace").strip()


def _session_process(job: Detached, session_id: str, tell: int) -> None:
    """The first child: leave the terminal, fork the session process, and exit (never returns)."""
    status = 70
    try:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        screen = Screen(*job.size)
        _stdio_to(places.home() / f"{session_id}.log", screen)
        status = asyncio.run(_serve(job, session_id, tell, screen))
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def _stdio_to(log: Path, screen: Screen) -> None:
    """Standard input, output and error to the app's pty; `sys.stderr` to the session's log (0600)."""
    err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    screen.take_stdio()
    sys.stderr = os.fdopen(err, "w", buffering=1)


async def _serve(job: Detached, session_id: str, tell: int, screen: Screen) -> int:
    """Start the app and its job, listen on the session's socket, say so, then serve until the
    session ends."""
    token = secrets.token_hex(16)
    ctx = job.context(job.spec)
    host = Host(ctx, session_id, token, job.detached_timeout, job.collapse)
    app = job.app(ctx)
    host.show(screen, app)
    running = asyncio.create_task(app.run(host.leave))
    running.add_done_callback(lambda _: host.end(None, "quit in the app"))
    entry = places.Entry(
        session_id,
        os.getpid(),
        psutil.Process().create_time(),
        script_of(job.spec),
        job.spec.nproc,
        time.time(),
        token,
    )
    try:
        try:
            listening = _listen(entry.socket)
            error = await app.started()
        except OSError as exc:
            error = str(exc)
        if error:
            os.write(tell, f"{error}\n".encode())
            await app.stop()
            return 2
        places.write(entry)
        os.write(tell, f"ok\n{ctx.session.listen_line}\n".encode())
        os.close(tell)
        if job.owned:
            host.await_owner()
        status = await host.serve(listening)
        print(f"ddptui: session {session_id} ended: {host.why}", file=sys.stderr)
        return status
    finally:
        await ctx.session.close()
        places.remove(session_id)


def _listen(path: Path) -> socket.socket:
    """The session's socket, bound 0600 (OSError: a path in use or too long)."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listening.bind(str(path))
    except OSError as exc:
        listening.close()
        raise OSError(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    listening.listen(16)
    return listening
