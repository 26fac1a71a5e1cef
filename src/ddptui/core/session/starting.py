"""Starting a session: its directory, its link server and the job's processes, then the ranks
that connect to it.

`Session.start` is `start`; it is apart from the running session's code because nothing else in
it is about the beginning (as `teardown` is about the end).
"""

from __future__ import annotations

import functools
import os
import secrets
from typing import Protocol

from ddptui.core.session.arrivals import Arrivals
from ddptui.core.session.rank import Rank
from ddptui.core.session.resources import Resources
from ddptui.core.transport import launch
from ddptui.core.transport.channel import ChannelServer, Connection
from ddptui.core.transport.interface import RankTransport
from ddptui.core.transport.local import LocalJob, LocalRank, SpawnError
from ddptui.rank.protocol import Hello, mark_key


class Starting(Protocol):
    """What starting a session needs of it (`Session` is one)."""

    spec: launch.LaunchSpec
    ranks: list[Rank]
    resources: Resources
    arrivals: Arrivals
    port: int
    mark_key: bytes

    def open_log(self, nproc: int) -> None:
        """`--log-dir`: log every rank's output and state changes."""

    def add_rank(self, index: int, transport: RankTransport) -> None:
        """Track a rank."""

    def log(self, line: str) -> None:
        """Tell the user something about the session itself."""


async def start(session: Starting) -> None:
    """Open the logs and the rank link server, then spawn every rank (or start the job's launcher,
    or listen for ranks)."""
    spec = session.spec
    if spec.master_port is not None and not spec.command:
        launch.check_port(spec.master_addr, spec.master_port)
    session.port = spec.master_port or launch.free_port(spec.master_addr)
    if spec.log_dir and not spec.command:
        session.open_log(spec.nproc)
    held = session.resources
    held.dir = launch.private_dir()
    token = secrets.token_hex(16)
    session.mark_key = mark_key(token)
    path = os.path.join(held.dir, launch.SOCKET_NAME)
    held.server = ChannelServer(path, token, functools.partial(bind, session), session.log)
    await held.server.start()
    held.job = LocalJob(held.dir, pump=bool(spec.pump))
    held.job.start(dict(os.environ, PYTHONPATH=launch.python_path(os.environ.get("PYTHONPATH")) or ""))
    link = launch.Link(held.server.path, held.dir, token)
    if spec.listen is not None:
        await session.arrivals.listen(spec.listen, token)
    elif spec.command:
        session.arrivals.start_launcher(link)
    else:
        spawn_ranks(session, held.job, link)


def spawn_ranks(session: Starting, job: LocalJob, link: launch.Link) -> None:
    """Spawn every rank of a job ddptui starts itself, each in its own pty."""
    spec = session.spec
    run_id = spec.run_id or launch.new_run_id()
    for index in range(spec.nproc):
        env = launch.rank_env(spec, index, session.port, run_id, link)
        try:
            transport = job.spawn(spec.argv(), env, spec.cwd, (spec.columns, spec.lines))
        except SpawnError as exc:
            raise launch.LaunchError(str(exc)) from None
        session.add_rank(index, transport)


def bind(session: Starting, connection: Connection, hello: Hello) -> str | None:
    """Bind an authenticated link to the rank whose process is at the other end; None when
    bound, else why not."""
    arrivals = session.arrivals
    if arrivals.launcher is not None or arrivals.address is not None:
        return arrivals.arrived(connection, hello)
    for rank in session.ranks:
        transport = rank.transport
        if isinstance(transport, LocalRank) and transport.pid == connection.peer_pid:
            if transport.linked:
                return f"rank {rank.index}'s process is linked already"
            transport.identity = hello.identity
            transport.link(connection)
            rank.linked()
            return None
    return "not a rank of this session"
