"""`python -m ddptui.rank [-m MODULE | SCRIPT] [ARGS...]`: run the user's code as one rank.

Installs `RankPdb` for every breakpoint flavour, registers faulthandler on SIGUSR1, runs the
script with runpy, and turns an uncaught exception into a traceback plus a post-mortem prompt.
"""

from __future__ import annotations

import atexit
import bdb
import faulthandler
import os
import runpy
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import IO, Any

from ddptui.rank import breaks, collectives, debugger, fatal, opening, spawns, tempdirs, timeouts, topology
from ddptui.rank.frames import trim_traceback
from ddptui.rank.link import link
from ddptui.rank.protocol import (
    STATE_DIR_ENV,
    Crashed,
    Exited,
    Frame,
    Identity,
    Message,
    Request,
    StartsRanks,
)


def stack_dump_file(rank: int) -> IO[Any]:
    """The file SIGUSR1 dumps every thread's stack into (the core reads it to say where a rank waits)."""
    state_dir = os.environ.get(STATE_DIR_ENV)
    if not state_dir:
        return sys.stderr
    return open(os.path.join(state_dir, f"stack-{rank}.txt"), "a")  # kept open; append: the core truncates it


def route_stack_dumps(rank: int) -> None:
    """Dump every thread's stack on SIGUSR1, received by a thread of ddptui's own.

    A signal landing on the main thread interrupts its system call (poll, connect), and torch
    then logs an error and retries its TCPStore connection seconds later. Blocking SIGUSR1 in
    the main thread (and so in every thread it starts) leaves it to an idle thread instead.
    """
    faulthandler.register(signal.SIGUSR1, file=stack_dump_file(rank), all_threads=True)
    _signal_thread.start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    os.register_at_fork(after_in_child=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1}))
    atexit.register(stop_stack_dumps)  # the last exit function: the program's own run before it


_signals_end = threading.Event()


def _take_signals() -> None:
    """The one thread SIGUSR1 is delivered to; once told to end, it blocks the signal too."""
    _signals_end.wait()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})


_signal_thread = threading.Thread(target=_take_signals, name="ddptui-signals", daemon=True)


def stop_stack_dumps() -> None:
    """At exit: no more dumps, and no thread left that takes SIGUSR1 (it stays pending).

    A dump the core asks for as a rank exits (it asks when a rank goes quiet) would otherwise kill
    the rank after its work is done, as if it had failed: with SIGUSR1, once Python's finalization
    has put its default action back, or with SIGSEGV, dumping threads being torn down.
    """
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    _signals_end.set()
    _signal_thread.join(1.0)


def exit_code(code: Any) -> int:
    """The process status `SystemExit(code)` stands for."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def report_crash(exc: BaseException) -> None:
    """Print the user's traceback without launcher frames, tell the core, then open post-mortem."""
    tb = trim_traceback(exc.__traceback__)
    traceback.print_exception(type(exc), exc, tb)
    sys.stderr.flush()
    frames = tuple(Frame(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(tb))
    link.send(Crashed(type(exc).__name__, _message(exc), frames))
    save_collectives()
    if tb is not None:
        opening.post_mortem(tb)


def answer_later(request: Request, send: Callable[[Message], None]) -> None:
    """Answer one of the core's requests (`ddptui.rank.requests`, imported at the first: the kinds
    and their handlers cost a rank's start-up some 20 ms, and many ranks are asked little)."""
    from ddptui.rank import requests

    requests.answer_later(request, send)


def save_collectives() -> None:
    """Leave the Flight Recorder's dump for the session's logs (`ddptui.rank.requests`)."""
    from ddptui.rank import requests

    requests.save_collectives()


def _message(exc: BaseException) -> str:
    """An exception's message, never raising (a broken `__str__` is the user's bug, not ours)."""
    try:
        return str(exc)
    except Exception:
        return "<message unavailable>"


def identity(rank: int) -> Identity:
    """Who this rank is, from the environment torchrun (or ddptui) gave it."""

    def number(name: str, default: int) -> int:
        value = os.environ.get(name, "")
        return int(value) if value.isdigit() else default

    return Identity(
        rank, number("LOCAL_RANK", rank), number("WORLD_SIZE", 1), socket.gethostname(), os.getpid()
    )


def run(argv: list[str]) -> int:
    """Run the user's script or module; return the process's exit status."""
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python -m ddptui.rank [-m MODULE | SCRIPT] [ARGS...]", file=sys.stderr)
        return 2
    rank = debugger.rank_number()
    opening.install()
    route_stack_dumps(rank)
    state_dir = os.environ.get(STATE_DIR_ENV)
    if state_dir:
        fatal.install(os.path.join(state_dir, f"fatal-{rank}.txt"))
        tempdirs.record_in(state_dir)
    collectives.install_wrappers_on_import()
    timeouts.install_on_import()
    topology.track_meshes()
    spawns.refuse_in_rank(link.send, StartsRanks(spawns.LAUNCHER))
    link.connect(identity(rank), answer_later)
    if link.refused is not None:  # ddptui said why; the rank runs undebugged
        debugger.detach(lambda: None)
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            breaks.arm()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            breaks.arm()
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        return exit_code(exc.code)
    except bdb.BdbQuit:
        print(f"ddptui: rank {rank} quit the debugger", file=sys.stderr)
        return 1
    except BaseException as exc:  # any uncaught error gets a post-mortem
        report_crash(exc)
        return 1
    return 0


def main() -> None:
    """Entry point: run, report `exited`, and exit with the script's status."""
    code = run(sys.argv[1:])
    record = None
    if "torch.distributed" in sys.modules:
        record = collectives.collective_log()
        save_collectives()
    link.send(Exited(code, record))
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
