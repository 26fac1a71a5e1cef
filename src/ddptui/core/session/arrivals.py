"""`Arrivals`: wrap and listen mode, where the ranks are not ddptui's to spawn but connect to it.

In wrap mode (`ddptui -- torchrun ...`) the job's own launcher runs in a pty with the hook that
makes its ranks connect; with `ddptui listen` the ranks connect over TCP from wherever the job
runs. Either way the first rank to connect tells the world size, which makes a placeholder rank
each (`LinkedRank`) until its process connects and is bound to it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from ddptui.core.model.targets import name_ranks
from ddptui.core.session import wrap
from ddptui.core.session.rank import Rank
from ddptui.core.session.resources import Resources
from ddptui.core.transport import launch
from ddptui.core.transport.channel import Connection
from ddptui.core.transport.interface import RankTransport
from ddptui.core.transport.linked import LinkedRank
from ddptui.core.transport.local import SpawnError
from ddptui.rank.protocol import Hello


class Host(Protocol):
    """What taking in ranks needs of the session (`Session` is one)."""

    spec: launch.LaunchSpec
    ranks: list[Rank]
    resources: Resources
    on_world: list[Callable[[int], None]]

    on_restart: list[Callable[[int], None]]

    def add_rank(self, index: int, transport: RankTransport) -> None:
        """Track a rank."""

    def wire(self, rank: Rank, transport: RankTransport) -> None:
        """Route a transport's output, events and exit to `rank`."""

    def annotate(self, rank: Rank, line: str) -> None:
        """Write a line of ddptui's own into a rank's output."""

    def open_log(self, nproc: int) -> None:
        """`--log-dir`: log every rank's output and state changes."""

    def notify(self) -> None:
        """Wake every coroutine waiting for a change."""

    def log(self, line: str) -> None:
        """Tell the user something about the session itself."""

    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets`."""

    def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> Awaitable[bool]:
        """Wait until `condition()` holds; False if `timeout` passed first."""


class Arrivals:
    """The job's own launcher, and the ranks that arrive (wrap and listen mode)."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self._arrived_at: float | None = None
        """When the first rank connected (wrap mode: the others get `wrap.ARRIVAL_GRACE` from then)."""
        self.launcher: wrap.Launcher | None = None
        """Wrap mode: the command that launches the job (None for a job ddptui spawns itself)."""
        self.address: tuple[str, int] | None = None
        """`ddptui listen`: the TCP address ranks connect to."""
        self.listen_exports: list[str] = []
        """`ddptui listen`: the `NAME=value` words that make a job's ranks connect here."""

    def start_launcher(self, link: launch.Link) -> None:
        """Run the job's launcher in a pty, with the hook that makes its ranks connect."""
        session = self._session
        job = session.resources.job
        assert job is not None
        spec = session.spec
        env = wrap.launcher_env(spec, link)
        try:
            transport = job.spawn(list(spec.command), env, spec.cwd, (spec.columns, spec.lines))
        except SpawnError as exc:
            raise launch.LaunchError(str(exc)) from None
        self.launcher = wrap.Launcher(transport, session.notify)
        self.launcher.on_exit.append(lambda status: self._launcher_exited())

    async def listen(self, where: tuple[str, int], token: str) -> None:
        """`ddptui listen`: accept ranks over TCP; say the line that makes a job's ranks connect."""
        session = self._session
        server = session.resources.server
        assert server is not None
        try:
            self.address = address = await server.listen_tcp(*where)
        except OSError as exc:  # asyncio words it `error while attempting to bind ...`: say it plainly
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise launch.LaunchError(f"cannot listen on {where[0]}:{where[1]}: {why}") from None
        if session.spec.nproc:
            self._world(session.spec.nproc)
        self.listen_exports = wrap.listen_assignments(address, token, session.spec)
        line = "export " + " ".join(self.listen_exports)
        if session.spec.env_file:
            try:
                wrap.write_private(session.spec.env_file, line + "\n")
            except OSError as exc:
                raise launch.LaunchError(f"cannot write {session.spec.env_file}: {exc.strerror}") from None
        host, port = address
        size = f"{session.spec.nproc} ranks" if session.spec.nproc else "the job's ranks"
        also = f" (also in {session.spec.env_file})" if session.spec.env_file else ""
        session.log(f"listening on {host}:{port} for {size}; in the job's environment on all nodes{also}:")
        session.log(line)

    def _launcher_exited(self) -> None:
        """The launcher is gone: ranks that never connected never will."""
        for rank in self._session.ranks:
            if isinstance(rank.transport, LinkedRank):
                rank.transport.never_linked()

    def arrived(self, connection: Connection, hello: Hello) -> str | None:
        """Bind a wrapped rank's link to the rank it says it is (the first one makes the world);
        None when bound, else why not."""
        session = self._session
        if not session.ranks and hello.identity.world_size > 0:
            self._world(hello.identity.world_size)
        if session.resources.closing:
            return "ddptui is ending the job"
        refused = wrap.refusal(session.ranks, hello)
        if refused is not None:
            return refused
        rank = session.ranks[hello.identity.rank]
        if rank.transport.linked:  # its process is gone: the launcher restarted the job
            self.next_attempt(rank, hello.restarts)
        transport = rank.transport
        assert isinstance(transport, LinkedRank)
        transport.link(connection, hello)
        rank.linked()
        self._arrived_at = self._arrived_at or time.monotonic()
        return None

    def next_attempt(self, rank: Rank, restarts: int) -> None:
        """A new process takes a rank whose process is gone: the pane goes on under a line that
        says which attempt this is, and the rank's state starts again."""
        session = self._session
        transport = LinkedRank()
        session.wire(rank, transport)
        before = rank.transport
        if isinstance(before, LinkedRank) and before.size is not None:
            transport.resize(*before.size)  # the pane's size, sent as the new process links
        rank.restart(transport)
        for callback in session.on_restart:
            callback(rank.index)
        session.annotate(rank, wrap.attempt_line(rank.attempt, restarts))

    def _world(self, size: int) -> None:
        """The job's size is known: a placeholder rank each, until its process connects."""
        session = self._session
        for index in range(size):
            session.add_rank(index, LinkedRank())
        if session.spec.log_dir:
            session.open_log(size)
        for callback in session.on_world:
            callback(size)

    async def wait_launcher(self, timeout: float = 10.0) -> None:
        """Wrap mode: once no rank is alive, give the launcher `timeout` seconds to exit on its own."""
        session = self._session
        launcher = self.launcher
        if launcher is not None and not session.live(range(len(session.ranks))):
            await session.wait_until(lambda: not launcher.alive, timeout)

    async def wait_restarted(self, timeout: float = wrap.RESTART_WAIT) -> bool:
        """Wrap mode, when every rank's process is gone but the launcher runs (it may be restarting
        the job, as `torchrun --max-restarts` does): wait until the ranks have processes again (at
        most ARRIVAL_GRACE after the first), the launcher is gone, or `timeout` passed. True when
        ranks came back."""
        session = self._session
        launcher = self.launcher
        everyone = range(len(session.ranks))
        if launcher is None or not launcher.alive or session.live(everyone):
            return False
        await session.wait_until(lambda: not launcher.alive or bool(session.live(everyone)), timeout)
        if not session.live(everyone):
            return False
        await session.wait_until(
            lambda: not launcher.alive or all(rank.state.alive for rank in session.ranks),
            wrap.ARRIVAL_GRACE,
        )
        return True

    async def wait_started(self) -> None:
        """Wrap mode: wait until the job's ranks connected (at most ARRIVAL_GRACE after the first one),
        or its launcher is gone."""
        session = self._session
        if self.address is not None:  # ranks come when their job starts: wait for every one
            await session.wait_until(
                lambda: bool(session.ranks) and not any(wrap.absent(r) for r in session.ranks)
            )
            return
        launcher = self.launcher
        if launcher is None:
            return
        await session.wait_until(lambda: not launcher.alive or wrap.arrived(session.ranks, self._arrived_at))
        missing = {rank.index for rank in session.ranks if wrap.absent(rank) and rank.state.alive}
        if missing:
            who = f"{name_ranks(missing)} {'has' if len(missing) == 1 else 'have'}"
            session.log(f"{who} not connected to ddptui (on another node?)")
