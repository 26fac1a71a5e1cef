"""Helpers for the tests of detached sessions: a private session directory, the session's files,
its processes."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import Runner, wait_for

DETACHED = re.compile(
    r"^ddptui: session ([0-9a-f]{6}) runs (.+) detached: ddptui join \1 opens it, ddptui kill \1 ends it$"
)


class Sessions:
    """`ddptui --detach`, `sessions`, `join` and `kill` with a session directory of their own."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))  # short: socket paths
        runner.env["XDG_RUNTIME_DIR"] = str(self.runtime)
        self.home = self.runtime / "ddptui"

    def detach(self, *args: str, timeout: float = 60) -> str:
        """Start a detached session; its id."""
        result = self.runner.run("--detach", *args, timeout=timeout)
        assert result.returncode == 0, result.stdout + result.stderr
        match = DETACHED.match(result.stdout.strip())
        assert match, result.stdout
        return match.group(1)

    def join(self, lines: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        """`ddptui join --batch - [ARGS]` with `lines` on stdin, to completion."""
        return self.runner.run("join", "--batch", "-", *args, stdin=lines, timeout=timeout)

    def entry(self, session: str) -> dict[str, object]:
        """The session's file."""
        body: dict[str, object] = json.loads((self.home / f"{session}.json").read_text())
        return body

    def process(self, session: str) -> psutil.Process:
        """The session process."""
        return psutil.Process(int(str(self.entry(session)["pid"])))

    def ranks(self, session: str) -> list[psutil.Process]:
        """The session's rank processes (and whatever else descends from the session process)."""
        return self.process(session).children(recursive=True)

    def files(self) -> list[str]:
        """Names in the session directory."""
        return sorted(path.name for path in self.home.iterdir()) if self.home.exists() else []


def one_line(ddptui: Runner, *args: str, stdin: str = "") -> str:
    """Run ddptui; it must fail with exit status 2 and one line on stderr, which is returned."""
    result = ddptui.run(*args, stdin=stdin, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddptui: error: "), result.stderr
    return lines[0].removeprefix("ddptui: error: ")


def gone(processes: list[psutil.Process], timeout: float = 30) -> bool:
    """Wait until none of `processes` runs (a zombie counts as gone)."""

    def ended(process: psutil.Process) -> bool:
        try:
            return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            return True

    return wait_for(lambda: all(ended(p) for p in processes), timeout)


@pytest.fixture(name="sessions")
def sessions_fixture(ddptui: Runner) -> Iterator[Sessions]:
    """A private session directory; any session left is killed (the `ddptui` fixture then checks
    that no process is left)."""
    made = Sessions(ddptui)
    yield made
    for name in made.files():
        if name.endswith(".json"):
            with contextlib.suppress(psutil.Error, OSError, ValueError):
                process = made.process(name.removesuffix(".json"))
                ddptui.run("kill", name.removesuffix(".json"), timeout=60)
                process.terminate()
                gone([process])
    shutil.rmtree(made.runtime, ignore_errors=True)
