"""A running process's Python stack, read with `py-spy dump --nonblocking` (for `ddptui attach`).

The process's memory is read while it runs, so it is never paused, signalled or stopped, at the
price of a torn stack now and then on a process that is busy (a rank waiting in a collective
stands still, so its stack is exact).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from typing import Any

from ddptui.core.model.text import inert
from ddptui.rank.protocol import Frame

DUMP_TIMEOUT = 10.0
"""Seconds one `py-spy dump` may take."""
PY_SPY_ENV = "DDPTUI_PY_SPY"
"""Environment variable naming the py-spy to use; empty: use none."""
NOT_INSTALLED = "py-spy is not installed (pip install py-spy): no stacks, CPU state only"
NOT_PERMITTED = (
    "py-spy may not read the ranks (ptrace refused: attach as their user with kernel.yama.ptrace_scope=0, "
    "or as root, or with CAP_SYS_PTRACE; see docs/attach.md): no stacks, CPU state only"
)


def find_py_spy() -> str | None:
    """The py-spy executable: `$DDPTUI_PY_SPY` if set, else next to this Python (a venv), else on PATH."""
    chosen = os.environ.get(PY_SPY_ENV)
    if chosen is not None:
        return shutil.which(chosen) if chosen else None
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


class StackError(Exception):
    """A stack that could not be read; the message is one line."""


def parse_dump(text: str, pid: int) -> list[Frame]:
    """The main thread's frames, innermost first, from `py-spy dump --json` output."""
    try:
        threads = json.loads(text)
        thread = _main_thread(threads, pid)
        frames = [] if thread is None else thread["frames"]
        return [Frame(str(f["filename"]), int(f["line"]), str(f["name"]).rsplit(".", 1)[-1]) for f in frames]
    except (ValueError, KeyError, TypeError) as exc:
        raise StackError(f"py-spy's output did not parse ({type(exc).__name__})") from None


def _main_thread(threads: Any, pid: int) -> dict[str, Any] | None:
    """The thread whose OS id is the pid (the main thread), else the one named MainThread, else the first."""
    if not isinstance(threads, list) or not all(isinstance(t, dict) for t in threads):
        raise ValueError("not a list of threads")
    found: list[dict[str, Any]] = [t for t in threads if t.get("os_thread_id") == pid]
    found += [t for t in threads if t.get("thread_name") == "MainThread"] + threads
    return found[0] if found else None


def dump_problem(output: str) -> str:
    """One line saying why py-spy failed, from what it printed."""
    if "permission denied" in output.lower() or "not permitted" in output.lower():
        return NOT_PERMITTED
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    first = lines[0].removeprefix("Error: ") if lines else "no output"
    return f"py-spy failed: {inert(first)}"


async def read_stack(py_spy: str, pid: int) -> list[Frame]:
    """The main-thread stack of `pid`, read with py-spy without pausing it; raise StackError."""
    argv = [py_spy, "dump", "--pid", str(pid), "--json", "--nonblocking"]
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(), DUMP_TIMEOUT)
    except BaseException:  # a timeout, or Ctrl-C: py-spy must not outlive the look
        child.kill()
        await child.wait()
        raise
    if child.returncode != 0:
        raise StackError(dump_problem(err.decode(errors="replace") + out.decode(errors="replace")))
    return parse_dump(out.decode(errors="replace"), pid)
