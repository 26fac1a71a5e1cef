"""Start ranks the way torchrun would, each in a pseudo-terminal of its own."""

from __future__ import annotations

import errno
import json
import os
import site
import socket
import sys
import tempfile
import uuid
from dataclasses import dataclass, field

from ddptui.rank.breaks import BREAKS_ENV, START_ENV
from ddptui.rank.protocol import (
    PLAIN_INPUT_ENV,
    PLAIN_UNTIL_EDITED,
    RANK_ENV,
    SOCKET_ENV,
    STATE_DIR_ENV,
    TOKEN_ENV,
)
from ddptui.rank.timeouts import DEFAULT_PG_TIMEOUT, PG_TIMEOUT_ENV

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LaunchError(Exception):
    """A job that cannot be started; the message is one line for the user."""


@dataclass(frozen=True)
class LaunchSpec:
    """What to run and how, in torchrun's terms."""

    target: str
    args: tuple[str, ...] = ()
    module: bool = False
    nproc: int = 2
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    stall_timeout: float = 10.0
    pg_timeout: float = DEFAULT_PG_TIMEOUT
    log_dir: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    columns: int = 80
    lines: int = 24
    command: tuple[str, ...] = ()
    """Wrap mode (`ddptui -- COMMAND`): the command that launches the job; its ranks connect to ddptui."""
    run_id: str | None = None
    """`TORCHELASTIC_RUN_ID` (`--rdzv-id`); a new one when None."""
    role: str = "default"
    """`ROLE_NAME` (`--role`)."""
    scrollback: int = 5000
    """Lines of scrollback each rank's pane keeps (`--scrollback`)."""
    listen: tuple[str, int] | None = None
    """`ddptui listen`: the TCP address to accept ranks on (ddptui launches nothing; `nproc`, when
    not 0, is the world size to expect)."""
    on_disconnect: str = "continue"
    """`ddptui listen`: what a rank does when ddptui hangs up, `continue` undebugged or `exit`."""
    env_file: str | None = None
    """`ddptui listen`: a file to write the job's environment line to (0600)."""
    pump: bool | None = None
    """Drain the ranks' ptys in a pump process (`ddptui.core.transport.pump`) instead of on the event loop.
    None: the front end decides; the app turns it on (a flood then costs its loop one wake-up
    per pass), batch runs do without the extra hop."""
    line_editing: bool = True
    """Keys typed into a rank's pane reach pdb through readline (history, completion, editing
    keys), while commands ddptui sends are read as plain lines, a lighter step (`PLAIN_INPUT_ENV`);
    False (`--batch`, where only ddptui types): always plain lines."""
    breaks: tuple[str, ...] = ()
    """`--break`: breakpoints every rank sets before its program runs, checked and with absolute
    files (`ddptui.cli.break_options`)."""
    stop_at_start: bool = False
    """`--stop-at-start`: every rank stops at its program's first line."""
    all_stop: bool = True
    """When a rank stops at a breakpoint or crashes into post-mortem, stop the others too
    (`session.allstop`); False (`--non-stop`): they run on."""

    @property
    def starts_ranks(self) -> bool:
        """ddptui starts the ranks (itself or through a launcher it wraps), so it sets how their pdb
        reads commands (`PLAIN_INPUT_ENV`); `listen`'s ranks are started by someone else."""
        return self.listen is None

    def argv(self) -> list[str]:
        """The command line of one rank process."""
        target = ["-m", self.target] if self.module else [self.target]
        return [sys.executable, "-m", "ddptui.rank", *target, *self.args]


def free_port(addr: str) -> int:
    """A TCP port that is free on `addr` right now (torchrun picks its port the same way)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((addr, 0))
        return int(sock.getsockname()[1])


def check_port(addr: str, port: int, option: str = "--master-port") -> None:
    """Raise LaunchError when `port` is taken on `addr` (rank 0's store, or `listen`, could not bind it)."""
    error = _bind_error(addr, port)
    if error is not None:
        raise LaunchError(f"{option} {port} is busy on {addr}: {error.strerror}")


def check_ports(spec: LaunchSpec) -> None:
    """Raise LaunchError when a port the job is to open is taken: rank 0's store, or `listen`'s
    own (a one-line error before any screen opens)."""
    if spec.master_port is not None:
        check_port(spec.master_addr, spec.master_port)
    if spec.listen is not None and spec.listen[1]:
        check_port(*spec.listen, option="--port")


def listening(addr: str, port: int) -> bool:
    """True when a socket listens on `port` here (the job's store, once rank 0 opened it): found by
    binding the port, as rank 0's store would, so the store itself is never contacted."""
    error = _bind_error(addr, port)
    return error is not None and error.errno == errno.EADDRINUSE


def _bind_error(addr: str, port: int) -> OSError | None:
    """Why `port` on `addr` cannot be bound now (reusing ports in TIME_WAIT), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            return exc
    return None


def package_parent() -> str:
    """The directory holding the `ddptui` package (a source tree's `src`, or site-packages)."""
    return _PACKAGE_PARENT


def python_path(existing: str | None) -> str | None:
    """PYTHONPATH that lets rank processes import ddptui when it runs from a source tree."""
    installed = _PACKAGE_PARENT in [*site.getsitepackages(), site.getusersitepackages()]
    if installed:
        return existing
    return os.pathsep.join(filter(None, [_PACKAGE_PARENT, existing]))


@dataclass(frozen=True)
class Link:
    """Where a rank finds the core: the socket, the session's private directory, the token."""

    socket: str
    state_dir: str
    token: str


def rank_env(spec: LaunchSpec, rank: int, port: int, run_id: str, link: Link) -> dict[str, str]:
    """The environment torchrun gives a worker, plus ddptui's side-channel variables."""
    env = dict(os.environ)
    env.update(spec.env)
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        GROUP_RANK="0",
        GROUP_WORLD_SIZE="1",
        ROLE_RANK=str(rank),
        ROLE_NAME=spec.role,
        WORLD_SIZE=str(spec.nproc),
        LOCAL_WORLD_SIZE=str(spec.nproc),
        ROLE_WORLD_SIZE=str(spec.nproc),
        MASTER_ADDR=spec.master_addr,
        MASTER_PORT=str(port),
        TORCHELASTIC_RUN_ID=run_id,
        TORCHELASTIC_RESTART_COUNT="0",
        TORCHELASTIC_MAX_RESTARTS="0",
        TERM="xterm-256color",
    )
    env.setdefault("OMP_NUM_THREADS", "1")
    # torchrun's default: a timed-out NCCL operation ends the rank instead of hanging it
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    env[SOCKET_ENV], env[STATE_DIR_ENV], env[TOKEN_ENV] = link.socket, link.state_dir, link.token
    env[RANK_ENV] = str(rank)
    env[PG_TIMEOUT_ENV] = repr(float(spec.pg_timeout))
    plain_input(env, spec)
    break_env(env, spec)
    pythonpath = python_path(env.get("PYTHONPATH"))
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def plain_input(env: dict[str, str], spec: LaunchSpec) -> None:
    """Tell the ranks how their pdb reads commands (`LaunchSpec.line_editing`)."""
    env[PLAIN_INPUT_ENV] = PLAIN_UNTIL_EDITED if spec.line_editing else "1"


def break_env(env: dict[str, str], spec: LaunchSpec) -> dict[str, str]:
    """Give the ranks `--break` and `--stop-at-start` (`ddptui.rank.breaks`), and nothing else a
    ddptui around this one gave; returns `env`."""
    env.pop(BREAKS_ENV, None)
    env.pop(START_ENV, None)
    if spec.breaks:
        env[BREAKS_ENV] = json.dumps(list(spec.breaks))
    if spec.stop_at_start:
        env[START_ENV] = "1"
    return env


def new_run_id() -> str:
    """A run id like torchrun's default."""
    return uuid.uuid4().hex[:12]


SOCKET_NAME = "channel.sock"
_SUN_PATH_MAX = 107
"""Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL)."""


def private_dir() -> str:
    """A new 0700 directory for the session's socket and dumps, short enough for a socket path.

    It goes in TMPDIR like any temporary file; a TMPDIR so long that the socket's path would not
    fit in `sun_path` falls back to /tmp.
    """
    path = tempfile.mkdtemp(prefix="ddptui-")
    if len(os.path.join(path, SOCKET_NAME).encode()) <= _SUN_PATH_MAX:
        return path
    os.rmdir(path)
    return tempfile.mkdtemp(prefix="ddptui-", dir="/tmp")
