"""The processes of a job ddptui wraps (`ddptui -- torchrun ...`, `ddptui -- python spawn.py`) or
listens for (`ddptui listen`, jobs on other nodes).

The job runs with ddptui's `site/sitecustomize.py` first on PYTHONPATH, which calls `boot()` in
every Python process of the job. A process becomes a rank (a pty of its own relayed to ddptui,
RankPdb, post-mortem on an uncaught exception) when it starts with `RANK` in its environment
(torchrun's workers), or once `init_process_group` returns (an `mp.spawn` worker or an `srun`
task learns its rank there); one that stops at a breakpoint before that takes its spawn index
(mp.spawn) or `SLURM_PROCID` (srun) as its rank. Processes a rank starts (DataLoader workers,
tools) are never ranks themselves: `OWNER_ENV` names the rank they descend from. Everything else
(torchrun's agent, the script that calls `mp.spawn`) stays as it is, output and all. Standard
library only.
"""

from __future__ import annotations

import atexit
import bdb
import functools
import os
import socket
import sys
import threading
import types
from typing import Any

from ddptui.rank import breaks, collectives, debugger, fatal, opening, spawns, tempdirs, timeouts, topology
from ddptui.rank.hooks import C10D, when_imported
from ddptui.rank.link import link
from ddptui.rank.protocol import RANK_ENV, SOCKET_ENV, STATE_DIR_ENV, Exited, Identity
from ddptui.rank.relay import Relay

OWNER_ENV = "DDPTUI_RANK_PID"
"""Environment variable: the pid of the rank a process descends from (it is not a rank itself)."""
BREAKPOINT_HOOK = "ddptui.rank.wrapped.breakpointhook"
"""What ddptui sets PYTHONBREAKPOINT to in a wrapped job, unless the user set it."""
ON_DISCONNECT_ENV = "DDPTUI_ON_DISCONNECT"
"""Environment variable: `exit` makes a rank exit when ddptui hangs up; else it runs on undebugged."""
DISCONNECT_EXIT = 1
"""The status a rank exits with under `--on-disconnect exit`."""

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
"""The directory whose `sitecustomize.py` calls `boot()`: first on the PYTHONPATH of a job ddptui wraps."""

relay: Relay | None = None
"""This process's relayed terminal, once it is a rank."""
identity: Identity | None = None
"""Who this rank said it is."""
_exit_code: int | None = None
"""The status the process is exiting with, as far as ddptui saw it (`sys.exit`, an uncaught error)."""
_lock = threading.Lock()
_start: breaks.Start = breaks.main_module
"""Where `--stop-at-start` stops: the `__main__` module's first line, or an mp.spawn worker's function's."""


def boot() -> None:
    """Called by the session's `sitecustomize` in every Python process of the wrapped job."""
    if not os.environ.get(SOCKET_ENV) or os.environ.get(OWNER_ENV):
        return  # not ddptui's job, or a rank's own child
    timeouts.install_on_import()
    topology.track_meshes()
    collectives.install_wrappers_on_import()
    spawns.install_for_wrapped(_crashed_in_worker, _worker_starts)
    when_imported(C10D, _hook_init)
    rank = _env_int("RANK")
    if rank is not None and _env_int("WORLD_SIZE") is not None:
        become_rank(rank, _env_int("LOCAL_RANK", rank), _env_int("WORLD_SIZE", 1))


def become_rank(rank: int, local_rank: int | None, world_size: int | None) -> bool:
    """Connect to ddptui as `rank`, take a relayed terminal and the debugger; True when this is a rank."""
    global relay, identity
    with _lock:
        if relay is not None:
            return True
        if os.environ.get(OWNER_ENV) or link.refused is not None or (link.connected and relay is None):
            return False
        os.environ[RANK_ENV] = str(rank)
        os.environ[OWNER_ENV] = str(os.getpid())
        identity = Identity(
            rank,
            rank if local_rank is None else local_rank,
            world_size or 1,
            socket.gethostname(),
            os.getpid(),
        )
        from ddptui.rank.__main__ import answer_later  # a rank's start-up code, shared

        link.connect(identity, answer_later)
        if not link.connected:
            return False
        relay = Relay(link.send)
        link.terminal_changed()  # stdout is the relayed pty now: `paused` can go in it
        link.on_message = relay.receive
        link.on_lost = _disconnected
    opening.install()
    _install_rank_side(rank)
    atexit.register(_finish, os.getpid())
    breaks.arm(_start)
    return True


def _install_rank_side(rank: int) -> None:
    """What `python -m ddptui.rank` installs in a rank it runs: dumps, exception hook, exit status."""
    from ddptui.rank.__main__ import route_stack_dumps  # a rank's start-up code, shared

    state_dir = os.environ.get(STATE_DIR_ENV)
    if threading.current_thread() is threading.main_thread():
        route_stack_dumps(rank)
    if state_dir:
        fatal.install(os.path.join(state_dir, f"fatal-{rank}.txt"))
        tempdirs.record_in(state_dir)
    sys.excepthook = excepthook
    if not getattr(sys.exit, "__ddptui__", False):
        sys.exit = _recording_exit(sys.exit)


def _hook_init(c10d: Any) -> None:
    """Wrap `init_process_group` (and torch.distributed's copy of it) to learn the rank it made."""
    original = c10d.init_process_group

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _initialised(c10d)
        return result

    c10d.init_process_group = init_process_group
    package = sys.modules.get("torch.distributed")
    if package is not None and getattr(package, "init_process_group", None) is original:
        setattr(package, "init_process_group", init_process_group)  # noqa: B010


def _initialised(c10d: Any) -> None:
    """The default group exists: become its rank, and take the exception hook back from torch.

    `init_process_group` wraps `sys.excepthook` to prefix `[rankN]`, printing through a buffer:
    ddptui's hook, left under it, would print the traceback only after post-mortem.
    """
    try:
        rank, world = int(c10d.get_rank()), int(c10d.get_world_size())
    except Exception:
        return
    if relay is None:
        local = _env_int("LOCAL_RANK", spawns.index if spawns.index is not None else rank)
        become_rank(rank, local, world)
    elif identity is not None and (identity.rank, identity.world_size) != (rank, world):
        print(
            f"ddptui: this process told ddptui it is rank {identity.rank} of {identity.world_size}, "
            f"but init_process_group made it rank {rank} of {world}",
            file=sys.stderr,
        )
    if relay is not None:
        sys.excepthook = excepthook


def _early_rank() -> bool:
    """Become a rank before `init_process_group`: an mp.spawn worker takes its spawn index, an
    `srun` task (SLURM starts one process per rank, without torchrun) its `SLURM_PROCID`."""
    if relay is not None:
        return True
    nprocs = spawns.spawned_nprocs()
    if nprocs is not None and spawns.index is not None:
        return become_rank(spawns.index, spawns.index, nprocs)
    task, tasks = _env_int("SLURM_PROCID"), _env_int("SLURM_NTASKS")
    if task is not None and tasks is not None and "RANK" not in os.environ:
        return become_rank(task, _env_int("SLURM_LOCALID", task), tasks)
    return False


def breakpointhook(*args: Any, **kwargs: Any) -> None:
    """PYTHONBREAKPOINT of a wrapped job: a rank's RankPdb; pdb on its own terminal elsewhere;
    nothing in a process ddptui refused as a rank (its prompt would sit where nobody reads)."""
    if link.refused is not None:
        return
    frame = sys._getframe().f_back
    if _early_rank():
        debugger.RankPdb().set_trace(frame)
        return
    import pdb

    pdb.Pdb().set_trace(frame)


def excepthook(kind: type[BaseException], exc: BaseException, tb: types.TracebackType | None) -> None:
    """An uncaught exception in a rank: the traceback, `Crashed`, and a post-mortem prompt."""
    global _exit_code
    _exit_code = 1
    if isinstance(exc, bdb.BdbQuit):
        print(f"ddptui: rank {debugger.rank_number()} quit the debugger", file=sys.stderr)
        return
    from ddptui.rank.__main__ import report_crash

    report_crash(exc)


def _crashed_in_worker(exc: BaseException) -> None:
    """An mp.spawn worker's function raised: post-mortem in the worker, then mp.spawn goes on."""
    if isinstance(exc, bdb.BdbQuit):
        return
    if _early_rank():
        from ddptui.rank.__main__ import report_crash

        report_crash(exc)


def _worker_starts(fn: Any) -> None:
    """An mp.spawn worker is about to run its function: with `--break` or `--stop-at-start` it
    becomes a rank now, and `--stop-at-start` stops at the function's first line."""
    global _start
    code = getattr(fn, "__code__", None)
    if breaks.wanted() and relay is None and code is not None:
        _start = lambda frame: frame.f_code is code  # noqa: E731
        _early_rank()


def _recording_exit(original: Any) -> Any:
    """`sys.exit` that notes the status for `Exited` (an atexit hook cannot learn it otherwise)."""

    @functools.wraps(original)
    def exit(status: Any = None) -> Any:
        global _exit_code
        from ddptui.rank.__main__ import exit_code

        _exit_code = exit_code(status) if isinstance(status, int | None) else 1
        return original(status)

    exit.__ddptui__ = True  # type: ignore[attr-defined]
    return exit


def _finish(owner: int) -> None:
    """At exit: pass on the terminal's last bytes, then `Exited` with the collective log."""
    if os.getpid() != owner or relay is None or not link.connected:
        return  # not this rank, or ddptui is gone
    record = None
    if "torch.distributed" in sys.modules:
        record = collectives.collective_log()
        from ddptui.rank.__main__ import save_collectives

        save_collectives()
    relay.stop()
    link.send(Exited(_exit_code or 0, record))
    link.close()


def _disconnected() -> None:
    """ddptui hung up (it quit, or the network failed): run on undebugged, or exit, as the user chose.

    Runs on the link's thread. `continue` (the default) stops nothing from now on, leaves an open
    prompt with `continue`, and gives the process back its own stdin, stdout and stderr.
    """
    if relay is None:
        return
    rank = debugger.rank_number()
    if os.environ.get(ON_DISCONNECT_ENV) == "exit":
        relay.restore()
        print(f"ddptui: rank {rank} lost ddptui; exiting (--on-disconnect exit)", file=sys.stderr, flush=True)
        os._exit(DISCONNECT_EXIT)
    relay.say(f"ddptui: rank {rank} lost ddptui; running on without it\n")
    debugger.detach(relay.restore)
    if debugger.active is not None:
        relay.type_keys(b"\x15continue\n")  # Ctrl-U first: drop a half-typed line


def _env_int(name: str, default: int | None = None) -> int | None:
    """An environment variable as a non-negative integer, else `default`."""
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else default
