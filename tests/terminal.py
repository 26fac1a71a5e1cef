"""A real terminal for the tests: a private tmux server running one ddptui."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, Runner, wait_for

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)"
)


class Tmux:
    """A private tmux server running one ddptui in a window (200x50 unless told)."""

    def __init__(self, runner: Runner, *args: str, size: tuple[int, int] = (200, 50), env: str = "") -> None:
        """Run `ddptui ARGS` in a new window of `size`, with `env` (`NAME=VALUE ...`) added."""
        self.socket = f"ddptui-test-{uuid.uuid4().hex[:8]}"
        self.status = runner.tmpdir / f"status-{self.socket}"
        self.stty = (
            runner.tmpdir / f"stty-before-{self.socket}",
            runner.tmpdir / f"stty-after-{self.socket}",
        )
        """The terminal's settings (`stty -g`) before ddptui started and after it ended."""
        env = f"-u COLUMNS -u LINES TMPDIR={runner.tmpdir} {env}"  # the pytest plugins export COLUMNS=80
        command = " ".join([sys.executable, "-m", "ddptui", *args])
        before, after = self.stty
        shell = (
            f"cd {ROOT} && stty -g > {before}; env {env} {command}; "
            f"echo $? > {self.status}; stty -g > {after}; sleep 600"
        )
        self.tmux("new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), shell)
        self.socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def tmux(self, *args: str) -> str:
        """Run a tmux command against the private server."""
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True
        )
        return result.stdout

    def screen(self) -> str:
        """What the terminal shows."""
        return self.tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        """Type keys."""
        self.tmux("send-keys", *keys)

    def shows(self, text: str, timeout: float = 60) -> bool:
        """Wait until the screen shows `text`."""
        return wait_for(lambda: text in self.screen(), timeout, interval=0.2)

    def exit_status(self, timeout: float = 10) -> int | None:
        """ddptui's exit status once it has exited (the shell creates the file, then writes it)."""
        wait_for(lambda: self.status.exists() and self.status.read_text().endswith("\n"), timeout)
        text = self.status.read_text() if self.status.exists() else ""
        return int(text) if text.endswith("\n") else None

    def kill(self) -> None:
        """End the tmux server."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        self.socket_path.unlink(missing_ok=True)  # tmux leaves its socket file behind


def app_process(ddptui: Runner) -> psutil.Process:
    """The `ddptui` command the terminal's shell started (not the session process it forked)."""
    found = [
        process
        for process in ddptui.leftovers()
        if process.cmdline()[1:3] == ["-m", "ddptui"] and process.parent().name() in ("sh", "bash", "dash")
    ]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(name="tmux")
def tmux_fixture(ddptui: Runner) -> Iterator[type[Tmux]]:
    """Make Tmux sessions that are always killed."""
    made: list[Tmux] = []

    def make(*args: str, size: tuple[int, int] = (200, 50), env: str = "") -> Tmux:
        session = Tmux(ddptui, *args, size=size, env=env)
        made.append(session)
        return session

    yield make  # type: ignore[misc]
    for session in made:
        session.kill()
