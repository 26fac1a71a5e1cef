"""A detached session and the bench's tmux window, for `bench/join.py`: started, watched and ended.

Everything started here is ended by `end_all` (and `ddptui kill` for a session), whatever happens:
the processes a bench side started are waited for, then killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
from ui_flood import SIZE, Side, tmux, wait_for

import ddptui

SRC = str(Path(ddptui.__file__).resolve().parents[1])
"""The ddptui the bench imported: the commands it starts run the same code."""
START_TIMEOUT = 120.0
"""Seconds for a session to start, or the app to show its ranks and take F2."""
END_TIMEOUT = 60.0
"""Seconds for a side's processes to end once told to, before they are killed."""
SESSION_LINE = re.compile(r"session ([0-9a-f]+) runs")


def ddptui_argv(*args: str) -> list[str]:
    """The `ddptui` command with these arguments, run by this Python on the bench's ddptui."""
    return [sys.executable, "-m", "ddptui", *args]


def open_window(argv: list[str], env: dict[str, str]) -> psutil.Process:
    """The bench's tmux window (SIZE, no status line) running `argv`; its process."""
    options = [x for name, value in env.items() for x in ("-e", f"{name}={value}")]
    size = ["-x", str(SIZE[0]), "-y", str(SIZE[1])]
    tmux("new-session", "-d", "-s", "bench", *size, *options, *argv, ";", "set-option", "-g", "status", "off")
    return psutil.Process(int(tmux("display-message", "-p", "-t", "bench", "#{pane_pid}")))


def terminal_name() -> str:
    """The TERM tmux gives its panes: the session's app draws for the same terminal as the direct one."""
    return tmux("start-server", ";", "show-options", "-gv", "default-terminal") or "tmux-256color"


def shows(text: str) -> bool:
    """Whether the window shows `text`."""
    return text in tmux("capture-pane", "-p", "-t", "bench")


def typing_on_command_line() -> None:
    """Wait for the app to show, then F2: keys go to the command line (broadcast), as in ui_flood."""
    wait_for(lambda: shows("TYPING"), START_TIMEOUT, "the app to show its ranks")
    tmux("send-keys", "-t", "bench", "F2")
    wait_for(lambda: shows("BROADCAST"), START_TIMEOUT, "F2 to move typing to the command line")


def caught_up(ranks: int) -> bool:
    """Whether the window shows every rank's pdb prompt (the app shows 8 panes at most): the
    flood is on the screen to its end (polled every 50 ms: each look is a tmux command)."""
    time.sleep(0.05)
    screen = tmux("capture-pane", "-p", "-t", "bench")
    return all(f"(Pdb r{rank})" in screen for rank in range(min(ranks, 8)))


def pump_of(app: psutil.Process) -> list[psutil.Process]:
    """The app's pty pump process, if it has one."""
    return [
        child
        for child in app.children(recursive=True)
        if any("transport.pump" in part for part in cmdline(child))
    ]


def cmdline(process: psutil.Process) -> list[str]:
    """A process's command line ([] once it is gone)."""
    try:
        return list(process.cmdline())
    except psutil.Error:
        return []


def start_session(script: Path, ranks: int, env: dict[str, str]) -> tuple[str, psutil.Process]:
    """`ddptui --detach` on `script` with `env` added (the TERM of the bench's panes); the session's
    id and process."""
    env = dict(os.environ, **env, TERM=terminal_name())
    argv = ddptui_argv("--detach", "--nproc-per-node", str(ranks), str(script))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=START_TIMEOUT, check=False)
    found = SESSION_LINE.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(
            f"ddptui --detach failed ({done.returncode}): {(done.stderr or done.stdout).strip()}"
        )
    session_id = found.group(1)
    entry = json.loads((Path(os.environ["XDG_RUNTIME_DIR"], "ddptui", f"{session_id}.json")).read_text())
    return session_id, psutil.Process(entry["pid"])


def kill_session(session_id: str, side: Side) -> None:
    """`ddptui kill ID` (what a user does); a note if it fails (`end_all` then kills its processes)."""
    argv = ddptui_argv("kill", session_id)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=END_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        side.notes.append(f"ddptui kill {session_id} did not return in {END_TIMEOUT:.0f} s")
        return
    if done.returncode != 0:
        side.notes.append(f"ddptui kill {session_id}: {done.stderr.strip()}")


def end_all(processes: list[psutil.Process], side: Side) -> None:
    """Wait for the side's processes to end; kill (and note) any still running after END_TIMEOUT."""
    _, running = psutil.wait_procs(processes, timeout=END_TIMEOUT)
    for process in running:
        with contextlib.suppress(psutil.Error):
            side.notes.append(f"killed {process.pid} ({' '.join(cmdline(process))[:60]}): still running")
            process.kill()
    psutil.wait_procs(running, timeout=5)


def unique(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Each process once."""
    return list({process.pid: process for process in processes}.values())
