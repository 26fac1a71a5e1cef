"""The `ddptui` command line read: torchrun's options and ddptui's own, into a `LaunchSpec`
(`parse_spec`, `listen_spec`, `wrap_spec`); a mistake is a `UsageError`, said in one line."""

from __future__ import annotations

import argparse
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import replace
from typing import NoReturn

from ddptui import __version__
from ddptui.cli import break_options, torchrun_options
from ddptui.cli.script_check import ScriptError, check_script
from ddptui.core.commands.context import MAX_STOPS
from ddptui.core.detach import main as detached
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank.timeouts import DEFAULT_PG_TIMEOUT

DEMO_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo", "train.py")
DEMO_STEPS = os.path.join(os.path.dirname(DEMO_SCRIPT), "steps.txt")
"""What `--demo` replays as a batch when there is no terminal for the app."""


class UsageError(Exception):
    """Bad command-line usage; the message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing usage and exiting."""
        raise UsageError(f"{message} (see ddptui --help)")


def build_parser() -> Parser:
    """The command-line parser; option names follow torchrun."""
    parser = Parser(
        prog="ddptui",
        description="Run a PyTorch distributed job with one pdb pane per rank.",
        usage="ddptui [options] (SCRIPT | -m MODULE) [ARGS...]  |  ddptui [options] -- COMMAND...",
        epilog="ddptui listen: ranks started elsewhere connect (see ddptui listen --help); "
        "ddptui attach PID: a job already running, read-only (see ddptui attach --help); "
        "ddptui sessions, join, kill, serve: the sessions that run, left with Ctrl+D or started "
        "with --detach (see docs/remote.md)",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add(
        "--nproc-per-node",
        "--nproc_per_node",
        type=torchrun_options.nproc_per_node,
        default=2,
        metavar="N",
        help="ranks to start (default 2); auto, cpu or gpu count them as torchrun does",
    )
    add("--nnodes", type=str, default="1", help="nodes (default 1); more: torchrun launches the job")
    add("--node-rank", "--node_rank", type=int, default=0, help="this node's rank (default 0)")
    add("--master-addr", "--master_addr", default="127.0.0.1", metavar="ADDR", help="default 127.0.0.1")
    add("--master-port", "--master_port", type=int, default=None, metavar="PORT", help="default: a free port")
    add("--standalone", action="store_true", help="accepted for torchrun compatibility")
    torchrun_options.add_options(parser)
    add_session_options(parser)
    detached.add_options(parser)
    add("--demo", action="store_true", help="run the bundled 4-rank CPU DDP example")
    add("-m", "--module", action="store_true", help="SCRIPT is a module name, as in python -m")
    add("--version", action="version", version=f"ddptui {__version__}")
    add("script", nargs="?", help="the training script (or module with -m)")
    add("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return parser


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """ddptui's own options, whatever starts the job (a script, `-- COMMAND`, `listen`)."""
    add = parser.add_argument
    add(
        "--log-dir",
        "--log_dir",
        default=None,
        metavar="DIR",
        help="write each rank's terminal output to DIR/rank-N.log",
    )
    add(
        "--batch",
        default=None,
        metavar="FILE",
        help="run commands from FILE ('-' = stdin) headless, print answers",
    )
    add(
        "--stall-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a rank idle this long while no rank of the job uses CPU is 'waiting' (default 10)",
    )
    add(
        "--pg-timeout",
        type=float,
        default=DEFAULT_PG_TIMEOUT,
        metavar="SECONDS",
        help="raise every process group's timeout to at least SECONDS, so that a paused rank does not time "
        f"out the others (default {DEFAULT_PG_TIMEOUT:g}: a day)",
    )
    add(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --batch: end the whole run after SECONDS of wall-clock time (exit status 124)",
    )
    add(
        "--scrollback",
        type=int,
        default=5000,
        metavar="LINES",
        help="lines of scrollback each rank's pane keeps (default 5000; the full output: --log-dir)",
    )
    add(
        "--break",
        action="append",
        default=[],
        dest="breaks",
        metavar="FILE:LINE[,COND]",
        help="set a breakpoint in every rank before the script runs, as pdb's b takes it "
        "(FILE:LINE, FILE:FUNCTION, MODULE.FUNCTION; a condition after a comma); repeatable",
    )
    add("--stop-at-start", action="store_true", help="stop every rank at its script's first line")
    add(
        "--max-stops",
        type=int,
        default=MAX_STOPS,
        metavar="N",
        help=f":until and :until-diverge continue the ranks at most N times (default {MAX_STOPS})",
    )
    add(
        "--non-stop",
        action="store_true",
        help="when a rank stops at a breakpoint or crashes, the others run on (default: they stop too)",
    )
    add(
        "--no-collapse",
        action="store_true",
        help="with --batch: one line per rank even when ranks print the same (default: [ranks 0-3] once)",
    )


def listen_spec(argv: Sequence[str]) -> tuple[LaunchSpec, argparse.Namespace]:
    """`ddptui listen ...`: wait for the ranks of a job started elsewhere; raise UsageError."""
    parser = Parser(
        prog="ddptui listen",
        description="Wait for the ranks of a job started elsewhere (srun, torchrun on several nodes) to "
        "connect, each with its own pane. Prints the line to add to the job's environment.",
        usage="ddptui listen [--host HOST] [--port PORT] [--world-size N] [--detach] [options]",
        allow_abbrev=False,
    )
    add = parser.add_argument
    add(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: let other nodes in through an SSH tunnel; "
        "0.0.0.0 opens it to the network, where the token is all that keeps others out)",
    )
    add("--port", type=int, default=0, help="TCP port (default: a free one, printed)")
    add(
        "--world-size", type=int, default=None, metavar="N", help="ranks to wait for (default: what they say)"
    )
    add(
        "--on-disconnect",
        choices=("continue", "exit"),
        default="continue",
        help="when ddptui quits or the network fails, each rank runs on undebugged (continue, the "
        "default) or exits (exit)",
    )
    add(
        "--env-file",
        default=None,
        metavar="FILE",
        help="also write the line to FILE (0600) for `source FILE`",
    )
    add_session_options(parser)
    detached.add_options(parser)
    options = parser.parse_args(argv)
    if not 0 <= options.port < 65536:
        raise UsageError(f"--port {options.port} is not a port number")
    if options.world_size is not None and options.world_size < 1:
        raise UsageError(f"--world-size must be at least 1, not {options.world_size}")
    check_session_options(options)
    spec = LaunchSpec(
        target="listen",
        nproc=options.world_size or 0,
        listen=(options.host, options.port),
        on_disconnect=options.on_disconnect,
        env_file=options.env_file,
        stall_timeout=options.stall_timeout,
        pg_timeout=options.pg_timeout,
        log_dir=options.log_dir,
        scrollback=options.scrollback,
        all_stop=not options.non_stop,
    )
    return with_breaks(spec, options, None), options


def parse_spec(argv: Sequence[str]) -> tuple[LaunchSpec, argparse.Namespace]:
    """Turn the command line into a LaunchSpec, or raise UsageError."""
    if "--" in argv:
        head = build_parser().parse_args(argv[: argv.index("--")])
        command = list(argv[argv.index("--") + 1 :])
        if head.script is None and not old_script_form(command):
            return wrap_spec(head, argv[: argv.index("--")], command), head
    options = build_parser().parse_args(argv)
    if options.demo and options.script is None:
        options.script = DEMO_SCRIPT
        if "--nproc-per-node" not in argv and "--nproc_per_node" not in argv:
            options.nproc_per_node = 4
    if options.script is None:
        raise UsageError("no script given (usage: ddptui [options] SCRIPT [ARGS...])")
    if options.nproc_per_node < 1:
        raise UsageError(f"--nproc-per-node must be at least 1, not {options.nproc_per_node}")
    check_session_options(options)
    if options.master_port is not None and not 0 < options.master_port < 65536:
        raise UsageError(f"--master-port {options.master_port} is not a port number")
    if not options.module and not options.no_python:
        try:
            check_script(options.script)
        except ScriptError as exc:
            raise UsageError(str(exc)) from None
    if torchrun_options.needs_torchrun(options):  # torchrun launches it; its workers connect to ddptui
        return wrap_spec(options, [], torchrun_options.torchrun_command(options)), options
    master_addr, master_port = torchrun_options.master(options)
    if master_port is not None and not 0 < master_port < 65536:
        raise UsageError(f"--rdzv-endpoint port {master_port} is not a port number")
    spec = LaunchSpec(
        target=options.script,
        args=tuple(options.args),
        module=options.module,
        nproc=options.nproc_per_node,
        master_addr=master_addr,
        master_port=master_port,
        stall_timeout=options.stall_timeout,
        pg_timeout=options.pg_timeout,
        log_dir=options.log_dir,
        scrollback=options.scrollback,
        all_stop=not options.non_stop,
        run_id=options.rdzv_id,
        role=options.role or "default",
    )
    return with_breaks(spec, options, None if options.module else options.script), options


def check_session_options(options: argparse.Namespace) -> None:
    """ddptui's own options, whatever launches the job: raise UsageError on a bad one."""
    if not math.isfinite(options.stall_timeout) or options.stall_timeout <= 0:
        raise UsageError(f"--stall-timeout must be a positive number of seconds, not {options.stall_timeout}")
    if not math.isfinite(options.pg_timeout) or options.pg_timeout <= 0:
        raise UsageError(f"--pg-timeout must be a positive number of seconds, not {options.pg_timeout}")
    if options.timeout is not None and (not math.isfinite(options.timeout) or options.timeout <= 0):
        raise UsageError(f"--timeout must be a positive number of seconds, not {options.timeout}")
    if options.max_stops < 1:
        raise UsageError(f"--max-stops must be 1 or more stops, not {options.max_stops}")
    if options.scrollback < 0:
        raise UsageError(f"--scrollback must be 0 or more lines, not {options.scrollback}")
    if options.timeout is not None and options.batch is None:
        raise UsageError("--timeout applies to --batch runs only")
    if "detach" in options:
        detached.check_options(options)


def old_script_form(command: Sequence[str]) -> bool:
    """`ddptui -- train.py`: argparse's end of options, then a script (a .py file that is not executable)."""
    first = command[0] if command else ""
    return first.endswith(".py") and os.path.isfile(first) and not os.access(first, os.X_OK)


def wrap_spec(options: argparse.Namespace, given: Sequence[str], command: list[str]) -> LaunchSpec:
    """Wrap mode (`ddptui [options] -- COMMAND...`): COMMAND launches the job, its ranks connect."""
    if not command:
        raise UsageError("nothing to run after -- (usage: ddptui [options] -- COMMAND...)")
    if options.demo or options.module:
        raise UsageError("--demo and -m take a script, not a command after --")
    launch_options = torchrun_options.launch_options_given(given)
    if launch_options:
        raise UsageError(f"{launch_options[0]} is for the launcher: put it after -- (ddptui -- torchrun ...)")
    if shutil.which(command[0]) is None:
        raise UsageError(f"cannot run {command[0]}: no such command (or not executable)")
    check_session_options(options)
    spec = LaunchSpec(
        target=command[0],
        args=tuple(command[1:]),
        nproc=0,
        command=tuple(command),
        stall_timeout=options.stall_timeout,
        pg_timeout=options.pg_timeout,
        log_dir=options.log_dir,
        scrollback=options.scrollback,
        all_stop=not options.non_stop,
    )
    return with_breaks(spec, options, next((word for word in command if word.endswith(".py")), None))


def with_breaks(spec: LaunchSpec, options: argparse.Namespace, script: str | None) -> LaunchSpec:
    """`spec` with the checked `--break` breakpoints and `--stop-at-start`; UsageError for a bad one."""
    try:
        breaks = break_options.resolve_all(options.breaks, script)
    except break_options.BreakError as exc:
        raise UsageError(str(exc)) from None
    return replace(spec, breaks=breaks, stop_at_start=options.stop_at_start)
