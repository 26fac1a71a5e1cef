"""Wrap mode, `ddptui [options] -- COMMAND...`: the job's own launcher stays in charge.

ddptui runs COMMAND (`torchrun ...`, `python spawn.py`) in a pty of its own, with a private hook
directory first on PYTHONPATH: its `sitecustomize.py` makes every Python process of the job that
carries a rank connect to ddptui with a relayed terminal (`ddptui.rank.wrapped`). The launcher's
own output is shown as the launcher's; its exit is the job's last word. Teardown reaches every
process of the job like any session's: the launcher is spawned by ddptui, its workers descend
from it or carry the session's directory in their environment.
"""

from __future__ import annotations

import os
import shlex
import socket
import time
from collections.abc import Callable

from ddptui.core.model.output import OutputLog
from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.text import terminal_lines
from ddptui.core.session.rank import Rank
from ddptui.core.transport import launch
from ddptui.core.transport.linked import LinkedRank
from ddptui.core.transport.local import LocalRank
from ddptui.rank.protocol import RANK_ENV, SOCKET_ENV, STATE_DIR_ENV, TCP_PREFIX, TOKEN_ENV, Hello
from ddptui.rank.spawns import SPAWN_NPROCS_ENV
from ddptui.rank.timeouts import PG_TIMEOUT_ENV
from ddptui.rank.wrapped import BREAKPOINT_HOOK, ON_DISCONNECT_ENV, OWNER_ENV, SITE_DIR

LAUNCHER_GRACE = 2.0
"""Seconds a launcher gets between SIGTERM and SIGKILL at teardown, to end its workers and clean up
(torchrun removes its temporary directory); the end comes sooner when everything is gone."""
ARRIVAL_GRACE = 10.0
"""Seconds the ranks of a wrapped job have to connect once the first one has."""
RESTART_WAIT = 30.0
"""Seconds `--batch` waits, with every rank's process gone and the launcher running, for the
launcher to restart them before it goes on."""


def launcher_env(spec: launch.LaunchSpec, link: launch.Link) -> dict[str, str]:
    """The launcher's environment: the user's, plus the hook and ddptui's link (inherited by every worker)."""
    env = dict(os.environ)
    env.update(spec.env)
    for name in (RANK_ENV, OWNER_ENV, SPAWN_NPROCS_ENV):  # ddptui inside a ddptui rank starts afresh
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SITE_DIR, env.get("PYTHONPATH")]))
    env[SOCKET_ENV], env[STATE_DIR_ENV], env[TOKEN_ENV] = link.socket, link.state_dir, link.token
    env[PG_TIMEOUT_ENV] = repr(float(spec.pg_timeout))
    launch.plain_input(env, spec)
    launch.break_env(env, spec)
    if not env.get("PYTHONBREAKPOINT"):
        env["PYTHONBREAKPOINT"] = BREAKPOINT_HOOK
    env["TERM"] = "xterm-256color"
    return env


def listen_assignments(address: tuple[str, int], token: str, spec: launch.LaunchSpec) -> list[str]:
    """`ddptui listen`'s `NAME=value` words for a job script: what makes every rank of the job connect.

    The hook directory is this ddptui's: the nodes must see the same path (a shared file system)
    and run the same ddptui version, which the hello checks.
    """
    host, port = address
    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    values = {
        SOCKET_ENV: f"{TCP_PREFIX}{host}:{port}",
        TOKEN_ENV: token,
        ON_DISCONNECT_ENV: spec.on_disconnect,
        PG_TIMEOUT_ENV: repr(float(spec.pg_timeout)),
        "PYTHONBREAKPOINT": BREAKPOINT_HOOK,
        **launch.break_env({}, spec),
    }
    assignments = [f"{name}={shlex.quote(value)}" for name, value in values.items()]
    assignments.append(f"PYTHONPATH={shlex.quote(SITE_DIR)}${{PYTHONPATH:+:$PYTHONPATH}}")
    return assignments


def fold_exports(assignments: list[str], width: int) -> list[str]:
    """The assignments as `export` statements of at most `width` characters where possible: each a
    whole shell statement, so the lines can be copied from a narrow log together."""
    statements: list[str] = []
    for assignment in assignments:
        if statements and len(statements[-1]) + 1 + len(assignment) <= width:
            statements[-1] += " " + assignment
        else:
            statements.append("export " + assignment)
    return statements


def write_private(path: str, text: str) -> None:
    """Write `text` to `path`, readable by this user only; never through a symlink (it holds the token)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, 0o600)
        file.write(text)


def spawn_advice(spec: launch.LaunchSpec, launcher: str) -> str:
    """What to say when a rank of a job ddptui spawned starts ranks of its own."""
    target = ["-m", spec.target] if spec.module else [spec.target]
    command = shlex.join(["python", *target, *spec.args])
    return f"this script starts its own ranks ({launcher}): run it as  ddptui -- {command}"


def refusal(ranks: list[Rank], hello: Hello) -> str | None:
    """Why the rank a wrapped process's hello names cannot be its; None when it can.

    Ranks are told apart by what they say (their global rank), not by pid: ddptui did not start
    them. The token proved they belong to this session. A rank's process is the one on its live
    link: a claim for a rank whose process is gone (exited, or its link closed) is its launcher's
    next attempt and takes it; a claim for a rank whose process is still there is refused.
    """
    who = hello.identity
    if who.world_size != len(ranks) or not 0 <= who.rank < len(ranks):
        return f"it says it is rank {who.rank} of {who.world_size}, but the job has {len(ranks)} ranks"
    transport = ranks[who.rank].transport
    if not isinstance(transport, LinkedRank):
        return f"rank {who.rank} is not a rank that connects"
    if transport.linked and not transport.closed:
        holder = transport.identity.pid if transport.identity is not None else "?"
        return f"rank {who.rank} is pid {holder}, which is still running"
    return None


def attempt_line(number: int, restarts: int) -> str:
    """The line that opens a rank's next process in its pane: `── attempt 2 (torchrun restart 1) ──`."""
    restart = f" (torchrun restart {restarts})" if restarts else ""
    return f"── attempt {number}{restart} ──"


def absent(rank: Rank) -> bool:
    """True for a rank of a wrapped job whose process has not connected (yet, or ever)."""
    transport = rank.transport  # asked of every rank a few times a step: the class flag first
    return transport.dials_in and isinstance(transport, LinkedRank) and not transport.linked


def remote(rank: Rank) -> bool:
    """True for a rank that connected over TCP (`ddptui listen`): ddptui can reach it by its link only."""
    return isinstance(rank.transport, LinkedRank) and rank.transport.remote


def arrived(ranks: list[Rank], first: float | None) -> bool:
    """True once every rank connected, or ARRIVAL_GRACE seconds after the `first` one did."""
    if not ranks or first is None:
        return False
    return time.monotonic() - first > ARRIVAL_GRACE or not any(absent(rank) for rank in ranks)


class Launcher:
    """The command of a wrapped job: a terminal whose lines are shown, and an exit status."""

    def __init__(self, transport: LocalRank, changed: Callable[[], None]) -> None:
        self.transport = transport
        self.command = ""
        self.output = OutputLog()
        self.state = RankState(Phase.RUNNING)
        self.on_lines: list[Callable[[list[str]], None]] = []
        """Called with each complete line the launcher printed (as plain text)."""
        self.on_exit: list[Callable[[int], None]] = []
        self._changed = changed
        self._partial = b""
        transport.on_output = self._output
        transport.on_exit = self._exited

    @property
    def alive(self) -> bool:
        """True until the launcher's process exited."""
        return self.state.alive

    def describe(self) -> str:
        """`launcher: exited 0`, the summary's last line."""
        return f"launcher: {self.state.describe()}"

    def ending(self) -> None:
        """ddptui is ending the launcher (teardown)."""
        if self.state.alive:
            self.state = self.state.ending()

    def _output(self, data: bytes) -> None:
        """Keep the bytes; hand complete lines to the front ends that show them."""
        self.output.append(data)
        complete, _, self._partial = (self._partial + data).rpartition(b"\n")
        if complete and self.on_lines:
            lines = terminal_lines(complete + b"\n")
            for callback in self.on_lines:
                callback(lines)
        self._changed()

    def _exited(self, status: int) -> None:
        """Record the launcher's exit status."""
        if self._partial and self.on_lines:
            for callback in self.on_lines:
                callback(terminal_lines(self._partial))
        self._partial = b""
        self.state = self.state.exited(status)
        for exited in self.on_exit:
            exited(status)
        self._changed()
