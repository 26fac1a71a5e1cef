"""The `ddptui` command: torchrun's options, then the interactive app or `--batch`."""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

from ddptui.cli import torchrun_options
from ddptui.cli.options import DEMO_STEPS, UsageError, listen_spec, parse_spec
from ddptui.core.commands import batch, batch_input
from ddptui.core.commands.batch_input import BatchInputError
from ddptui.core.commands.context import Context
from ddptui.core.detach import main as detached
from ddptui.core.detach import places
from ddptui.core.detach.screen import DEFAULT_SIZE
from ddptui.core.detach.start import Detached, DetachError, detach
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchError, LaunchSpec, check_port, check_ports
from ddptui.core.transport.logs import check_log_dir


def batch_context(spec: LaunchSpec, options: argparse.Namespace) -> Context:
    """The session of a batch run, and its commands' context."""
    if spec.starts_ranks:  # only ddptui types into their terminals
        spec = replace(spec, line_editing=False)
    ctx = Context.of(Session(spec))
    ctx.max_stops = options.max_stops
    return ctx


def app_context(spec: LaunchSpec, options: argparse.Namespace, notes: Sequence[str] = ()) -> Context:
    """The session of the app (ranks' line editing on: the user types into them), and its context;
    `notes` are said in its command log (the app's screen hides what went to stderr)."""
    session = Session(spec)
    session.notices.extend(notes)
    ctx = Context.of(session)
    ctx.max_stops = options.max_stops
    return ctx


def run_owned(spec: LaunchSpec, options: argparse.Namespace, notes: Sequence[str]) -> int | None:
    """The app in a session process of its own, shown in this terminal as `ddptui join` shows it:
    Ctrl+D leaves it running; quitting, a signal or this terminal going away ends it. None where no
    session directory can be used (the app then runs in this process)."""
    try:
        places.checked_home(create=True)
    except places.PlaceError:
        return None
    check_ports(spec)
    session_id, _ = detach(session_job(spec, options, notes, owned=True))
    return detached.own(session_id)


def session_job(
    spec: LaunchSpec, options: argparse.Namespace, notes: Sequence[str] = (), owned: bool = False
) -> Detached:
    """What a session process runs: the app on the job, at this terminal's size."""
    from ddptui.ui.served import ServedApp

    make = functools.partial(app_context, options=options, notes=notes)
    timeout = None if owned else options.detached_timeout
    size = shutil.get_terminal_size(DEFAULT_SIZE)
    return Detached(spec, make, ServedApp, timeout, not options.no_collapse, size, owned)


async def run_batch(ctx: Context, options: argparse.Namespace) -> int:
    """Start the job and replay a batch file against it (for at most `--timeout` seconds)."""
    session = ctx.session
    try:
        await session.start()
        return await batch.run(ctx, options.batch, timeout=options.timeout, collapse=not options.no_collapse)
    finally:
        await session.close()


async def guarded(
    main: asyncio.Future[int] | asyncio.Task[int], interrupt: Callable[[], bool] = lambda: False
) -> int:
    """Await the main task; SIGINT/SIGTERM/SIGHUP cancel it so teardown still runs.

    A SIGINT (Ctrl-C) that `interrupt()` takes (it stopped a running `:until`) ends nothing else.
    Only the first signal cancels: `timeout` signals ddptui and then its process group, and a
    second cancel would cut the teardown short (teardown is bounded anyway).
    """
    loop = asyncio.get_running_loop()
    caught: list[int] = []

    def stop(sig: int) -> None:
        if sig == signal.SIGINT and not caught and interrupt():
            return
        caught.append(sig)
        if len(caught) == 1:
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await main
    except asyncio.CancelledError:
        return 128 + (caught[0] if caught else signal.SIGINT)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ddptui` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["attach"]:  # a job already running; a script named attach runs as ./attach
        from ddptui.core.attach.main import main as attach

        return attach(argv[1:])
    if argv[:1] and argv[0] in detached.COMMANDS:  # the sessions that run
        if argv[0] == "serve":
            from ddptui.ui.web_server import serve  # textual-serve and aiohttp: for serve only

            return detached.main(argv, serve)
        return detached.main(argv)
    try:
        spec, options = listen_spec(argv[1:]) if argv[:1] == ["listen"] else parse_spec(argv)
        notes = torchrun_options.wrapped_notes if spec.command else torchrun_options.notes
        said = [] if spec.listen else notes(options)
        for note in said:
            print(f"ddptui: {note}", file=sys.stderr)
        if options.batch is not None:
            batch_input.check_source(options.batch)
        if spec.log_dir:
            check_log_dir(spec.log_dir, spec.nproc)
        if getattr(options, "detach", False):  # a session process runs the app on a pty of its own
            job = session_job(spec, options, said)
            web: tuple[str, int] | None = options.web
            if web is not None:  # a busy port is said before the session starts
                check_port(web[0], web[1], option="--web")
            session_id, started = detach(job)
            print(started, flush=True)
            if web is None:
                return 0
            from ddptui.ui.web_server import serve

            return detached.main(["serve", session_id, "--host", web[0], "--port", str(web[1])], serve)
        if options.batch is None and not (sys.stdin.isatty() and sys.stdout.isatty()):
            if not options.demo:
                raise UsageError(
                    "the app needs a terminal (standard input and output); scripts and CI: --batch FILE"
                )
            print("ddptui: no terminal for the app: the demo runs as --batch would", file=sys.stderr)
            options.batch = DEMO_STEPS
    except (UsageError, BatchInputError, LaunchError, DetachError) as exc:
        print(f"ddptui: error: {exc}", file=sys.stderr)
        return 2
    try:
        if options.batch is not None:
            return asyncio.run(_guarded_batch(spec, options))
        owned = None if options.no_session else run_owned(spec, options, said)
        if owned is not None:
            return owned
        from ddptui.ui.app import run_app

        session = Session(spec)
        session.notices.extend(said)  # the app's screen hides stderr: its command log says them too
        return int(run_app(session, max_stops=options.max_stops))
    except (LaunchError, DetachError) as exc:
        print(f"ddptui: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout closed early (`ddptui --batch ... | head`): the ranks are ended
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:
        if os.environ.get("DDPTUI_DEBUG"):
            raise
        where = "(DDPTUI_DEBUG=1 shows where)"
        print(f"ddptui: internal error: {type(exc).__name__}: {exc} {where}", file=sys.stderr)
        return 70


async def _guarded_batch(spec: LaunchSpec, options: argparse.Namespace) -> int:
    """run_batch under the signal guard; Ctrl-C stops a running `:until` first."""
    ctx = batch_context(spec, options)
    return await guarded(asyncio.ensure_future(run_batch(ctx, options)), ctx.interrupt)
