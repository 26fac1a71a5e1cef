"""`ddptui sessions`, `join`, `kill`, `serve`: the commands that reach detached sessions."""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from ddptui.core.commands import batch_input
from ddptui.core.commands.batch_input import STDIN, BatchInputError
from ddptui.core.detach import places, viewer, web_relay
from ddptui.core.detach.client import Client, JoinError
from ddptui.core.detach.places import Entry, PlaceError
from ddptui.core.detach.start import DetachError
from ddptui.core.model.text import inert

COMMANDS = ("sessions", "join", "kill", "serve")
WEB_HOST, WEB_PORT = "127.0.0.1", 8000
Serving = Callable[[Entry, str, int], str]
"""Serves a session (its entry, a host, a port) to browsers until stopped; what to say then."""


class Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing usage and exiting."""
        raise DetachError(f"{message} (see {self.prog} --help)")


def add_options(parser: argparse.ArgumentParser) -> None:
    """`--detach` and `--detached-timeout`, for the `ddptui` command's parser."""
    parser.add_argument(
        "--detach",
        action="store_true",
        help="run the job in a session of its own that outlives this terminal, and return at once "
        "(then: ddptui sessions, ddptui join ID, ddptui kill ID)",
    )
    parser.add_argument(
        "--no-session",
        action="store_true",
        help="run the app in this process: it cannot be detached (Ctrl+D) nor joined from elsewhere",
    )
    parser.add_argument(
        "--web",
        nargs="?",
        const=f"{WEB_HOST}:{WEB_PORT}",
        default=None,
        metavar="[HOST:]PORT",
        help=f"--detach, then serve the session to a browser here as ddptui serve does (default "
        f"{WEB_HOST}:{WEB_PORT}; Ctrl+C stops serving, the session runs on)",
    )
    parser.add_argument(
        "--detached-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --detach: end the session after SECONDS with no client joined (default: never)",
    )


def check_options(options: argparse.Namespace) -> None:
    """DetachError for `--detach` options that do not go together; `--web` means `--detach` too."""
    if options.web is not None:
        options.web = web_address(options.web)
        options.detach = True
    timeout = options.detached_timeout
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise DetachError(f"--detached-timeout must be a positive number of seconds, not {timeout}")
    if timeout is not None and not options.detach:
        raise DetachError("--detached-timeout applies to --detach sessions only")
    if options.no_session and options.detach:
        raise DetachError("--no-session runs the app here: it does not go with --detach or --web")
    if options.detach and options.batch is not None:
        raise DetachError("--detach runs without --batch: drive the session with ddptui join --batch FILE")


def web_address(text: str) -> tuple[str, int]:
    """`--web`'s `[HOST:]PORT` (DetachError: not one)."""
    host, _, port = text.rpartition(":")
    try:
        return host or WEB_HOST, _port(port)
    except argparse.ArgumentTypeError as exc:
        raise DetachError(f"--web {text}: {exc}") from None


def main(argv: Sequence[str], serving: Serving | None = None) -> int:
    """`ddptui sessions|join|kill|serve ...`: one line and status 2 for bad input. `serving` serves
    a session to browsers until it is stopped (the ddptui command's: `ui.web_server.serve`)."""
    command, rest = argv[0], list(argv[1:])
    try:
        if command == "sessions":
            return sessions(rest)
        if command == "join":
            return join(rest)
        if command == "serve":
            return serve(rest, serving)
        return kill(rest)
    except (DetachError, PlaceError, JoinError, BatchInputError) as exc:
        print(f"ddptui: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `ddptui join ... | head`: the session stays as it is
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:  # the session stays as it is
        return 130


def sessions(argv: list[str]) -> int:
    """List the live sessions, one line each: id, script, ranks and their states, since."""
    Parser(prog="ddptui sessions", description="List the detached sessions that run.").parse_args(argv)
    found = places.live()
    if not found:
        print("ddptui: no session runs", file=sys.stderr)
    for entry in found:
        print(describe(entry))
    return 0


def describe(entry: Entry) -> str:
    """One session in a line."""
    shown = ""
    try:
        client = Client(entry)
        try:
            report = client.status()
        finally:
            client.close()
        states = "; ".join(report.ranks) or "no rank yet"
        if report.watching:
            shown = f"  (shown in {report.watching} terminal{'s' * (report.watching != 1)})"
    except JoinError as exc:
        states = f"not answering ({exc})"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.started))
    ranks = f"{entry.ranks} rank{'s' * (entry.ranks != 1)}" if entry.ranks else "ranks"
    return inert(f"{entry.id}  {entry.script}  {ranks}: {states}  since {since}{shown}")


def join(argv: list[str]) -> int:
    """Show a session's app in this terminal, or run a batch file's lines in it and print their
    transcript; either way, leave it as it is."""
    parser = Parser(
        prog="ddptui join",
        description="Open a session's app in this terminal (Ctrl+D leaves it running), or "
        "with --batch FILE drive it headless: each line of FILE runs as --batch runs it. Either way "
        "the session and its ranks stay as they are when you leave (:quit ends them).",
    )
    parser.add_argument("--batch", metavar="FILE", help="run FILE's lines ('-' = stdin) instead of the app")
    parser.add_argument(
        "--read-only", action="store_true", help="watch the app without typing into it (Ctrl+D leaves)"
    )
    parser.add_argument("--web", action="store_true", help=argparse.SUPPRESS)  # ddptui serve's, per tab
    parser.add_argument("id", nargs="?", help="the session (default: the only one that runs)")
    options = parser.parse_args(argv)
    if options.web:
        if options.batch is not None:
            raise DetachError("--web and --batch do not go together")
        return web_relay.relay(options.id, sys.stdout.buffer)
    if options.batch is None:
        entry = places.find(options.id)
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise JoinError(
                "ddptui join needs a terminal; ddptui join --batch FILE drives a session without one"
            )
        client = Client(entry)
        try:
            left = viewer.watch(client, read_only=options.read_only)
        finally:
            client.close()
        return viewer.say(left, entry.id)
    if options.read_only:
        raise DetachError("--read-only watches the app; --batch drives the session")
    batch_input.check_source(options.batch)
    client = Client(places.find(options.id))
    try:
        for line in _lines(options.batch):
            ended = client.run(line, sys.stdout)
            if ended is not None:
                viewer.print_summary(ended)
                return ended.status
    finally:
        client.close()
    return 0


def own(session_id: str) -> int:
    """Show a session in the terminal that started it (`ddptui SCRIPT`) until the app quits, the
    user detaches, or a signal ends it; its summary or one line, and the exit status."""
    try:
        entry = places.find(session_id)
        client = Client(entry)
        try:
            left = viewer.watch(client, owner=True)
        finally:
            client.close()
    except (PlaceError, JoinError) as exc:
        print(f"ddptui: error: {exc}", file=sys.stderr)
        return 2
    return viewer.say(left, entry.id)


def kill(argv: list[str]) -> int:
    """End a session and every rank; print its summary."""
    parser = Parser(prog="ddptui kill", description="End a detached session and every one of its ranks.")
    parser.add_argument("id", help="the session (ddptui sessions lists them)")
    options = parser.parse_args(argv)
    client = Client(places.find(options.id))
    try:
        ended = client.kill(io.StringIO())  # what the ranks printed is the app's to show
    finally:
        client.close()
    viewer.print_summary(ended)
    return 0


def serve(argv: list[str], serving: Serving | None) -> int:
    """Serve a session to browsers until Ctrl+C or its end; the session runs on."""
    parser = Parser(
        prog="ddptui serve",
        description="Open a session in the browser: serve its app with textual-serve, each "
        "tab joined to the session, behind a fresh token printed once in the URL. Ctrl+C stops "
        "serving; the session and its ranks run on.",
    )
    parser.add_argument("id", nargs="?", help="the session (default: the only one that runs)")
    parser.add_argument("--host", default=WEB_HOST, help=f"the address to serve on (default {WEB_HOST})")
    parser.add_argument(
        "--port", type=_port, default=WEB_PORT, help=f"the port to serve on (default {WEB_PORT})"
    )
    options = parser.parse_args(argv)
    entry = places.find(options.id)
    Client(entry).close()  # the session answers, and its token is the one in its file
    if serving is None:
        raise DetachError("this front end cannot serve a session to a browser")
    why = serving(entry, options.host, options.port)
    if why:
        print(f"ddptui: {why}", flush=True)
    return 0


def _port(text: str) -> int:
    """A TCP port number, 1 to 65535; argparse says what else is not one."""
    if not (text.isdigit() and 0 < int(text) < 65536):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1 to 65535)")
    return int(text)


def _lines(source: str) -> Iterator[str]:
    """The lines of `source` (`-`: standard input), read as `--batch` reads them."""
    try:
        stream = open(0, "rb", closefd=False) if source == STDIN else open(source, "rb")  # noqa: SIM115
        with stream:
            while chunk := stream.readline(batch_input.MAX_LINE):
                yield chunk.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")
    except OSError as exc:
        what = "standard input" if source == STDIN else f"batch file {source}"
        raise BatchInputError(f"cannot read {what}: {exc.strerror or exc}") from None
