"""`Quitting`: how the app ends. Asked first while ranks live; every rank ended, then the app exits
with the job's status; a hang-up (SIGHUP) ends the ranks too, and leaves at once where the
terminal has gone.
"""

from __future__ import annotations

import os
import signal
import sys
import termios
from collections.abc import Callable, Coroutine
from typing import Any

from ddptui.core.commands.batch import exit_status
from ddptui.core.session.session import Session
from ddptui.ui.quit_screen import QuitScreen

RunWorker = Callable[[Coroutine[Any, Any, None]], object]
"""Run a coroutine as the app's worker that ends the session (exclusive in its group)."""
Exit = Callable[[int], object]
"""Exit the app with a status."""
Notify = Callable[[str], object]
"""Show the user a short notification."""
Ask = Callable[[QuitScreen, Callable[[bool | None], None]], object]
"""Show a question on its own screen and call back with the answer (the app's `push_screen`)."""


def terminal_alive() -> bool:
    """Whether the app's terminal is still there (a hung-up terminal refuses even to be asked)."""
    out = sys.__stdout__
    try:
        termios.tcgetattr(out.fileno() if out is not None else -1)
    except (termios.error, OSError, ValueError):
        return False
    return True


class Quitting:
    """Ends the session and the app, once."""

    def __init__(self, session: Session, run_worker: RunWorker, exit: Exit, notify: Notify) -> None:
        """End `session` in a worker run by `run_worker`, then `exit`; `notify` says it is ending."""
        self._session = session
        self._run_worker = run_worker
        self._exit = exit
        self._notify = notify
        self.started = False
        """True once the app began to end: nothing new is sent to the ranks, no crash takes the keys."""
        self._signalled = 0
        """The signal that ended the app where its exit status must say so (SIGHUP), else 0."""

    def ask(self, ranks: range, ask: Ask) -> None:
        """Quit, asking first (with `ask`) while any of `ranks` is alive, saying what each is doing."""
        alive = tuple(rank.state for rank in self._session.live(ranks))
        if not alive:
            self.shutdown()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.shutdown()

        spec = self._session.spec
        leave = spec.listen is not None and spec.on_disconnect == "continue"
        ask(QuitScreen(alive, leave), answered)

    def shutdown(self) -> None:
        """End every rank, then exit."""
        if not self.started:
            self.started = True
            self._run_worker(self._end_session())

    def hang_up(self) -> None:
        """SIGHUP: end every rank. Where the terminal is still there (`kill -HUP`), leave as after
        SIGTERM: the terminal restored and the summary printed, status 128 + SIGHUP. Where it has
        gone, leave without touching it: Textual's own shutdown writes to the terminal to restore
        it, and blocks forever once the terminal has gone away."""
        if terminal_alive():
            self._signalled = signal.SIGHUP
            self.shutdown()
            return
        self.started = True
        self._run_worker(self._hang_up())

    async def _hang_up(self) -> None:
        """Close the session and exit the process at once (status 128 + SIGHUP)."""
        await self._session.close()
        os._exit(128 + signal.SIGHUP)

    async def _end_session(self) -> None:
        """Close the session (ends every rank process tree) and exit with the job's status."""
        self._notify("ending every rank…")
        await self._session.close()
        status = exit_status([rank.state for rank in self._session.ranks])
        self._exit(128 + self._signalled if self._signalled else status)
