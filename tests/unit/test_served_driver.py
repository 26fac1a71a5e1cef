"""`ServedDriver`: a session's app made smaller clears the whole terminal in its own output, so a
terminal larger than the app (another watcher of the session) keeps nothing of the larger frames."""

from __future__ import annotations

import os
import sys
import threading

import ptyprocess
import pyte
from conftest import wait_for

APP = """
from textual.app import App
from textual.widgets import Static
from ddptui.ui.served import ServedDriver

class Wide(App):
    CSS = "Screen { overflow: hidden hidden; } Static { width: 400; height: 60; text-wrap: nowrap; }"

    def compose(self):
        yield Static("\\n".join("#" * 400 for _ in range(60)))

Wide(driver_class=ServedDriver).run()
"""


def test_a_smaller_app_clears_what_a_larger_terminal_showed() -> None:
    screen = pyte.Screen(160, 40)  # the larger watcher: it sees every byte the app writes
    stream = pyte.ByteStream(screen)
    lock = threading.Lock()
    env = {name: value for name, value in os.environ.items() if name not in ("COLUMNS", "LINES")}
    app = ptyprocess.PtyProcess.spawn([sys.executable, "-c", APP], dimensions=(40, 160), env=env)

    def read() -> None:
        while True:
            try:
                data = app.read(65536)
            except EOFError:
                return
            with lock:
                stream.feed(data)

    def drawn(columns: int, lines: int) -> bool:
        with lock:
            rows = [screen.display[y].rstrip() for y in range(40)]
        return rows[:lines] == ["#" * columns] * lines and not any(rows[lines:])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: drawn(160, 40), 30), "\n".join(screen.display)
        app.setwinsize(30, 120)  # the session's pty takes a smaller watcher's size
        assert wait_for(lambda: drawn(120, 30), 30), "\n".join(screen.display)
    finally:
        app.terminate(force=True)
        reader.join(10)
