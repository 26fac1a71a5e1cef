"""`SessionNotes`: what the session says of itself, in the command log.

A refused connection or a log that stopped is an error line; `ddptui listen`'s line for the job
is folded to the log's width; a wrapped job's launcher's lines are tagged `[launcher]`. Notes said
before the app was up (the launch's) are shown first.
"""

from __future__ import annotations

from ddptui.core.commands.result import Result
from ddptui.core.session.session import Session
from ddptui.core.session.wrap import fold_exports
from ddptui.ui.command_log import CommandLog


class SessionNotes:
    """Shows a session's notices and its launcher's lines in a command log."""

    def __init__(self, session: Session, log: CommandLog) -> None:
        """Notes of `session`, shown in `log`."""
        self._session = session
        self._log = log

    def listen(self) -> None:
        """Show each notice as it comes, and those said before the app was up (the launch's)."""
        self._session.on_notice.append(self.notice)
        for line in list(self._session.notices):
            self.notice(line)

    def listen_to_launcher(self) -> None:
        """Wrap mode, once the session started: show the launcher's lines too."""
        if self._session.launcher is not None:
            self._session.launcher.on_lines.append(self.launcher_lines)

    def notice(self, line: str) -> None:
        """Show a line about the session itself (a refused connection, logging stopped)."""
        session, log = self._session, self._log
        if line == session.listen_line:  # `ddptui listen`: the line for the job, folded to fit
            width = max(log.scrollable_content_region.width, 40)
            log.show(Result(tuple(fold_exports(session.listen_exports, width))))
        elif line.startswith("listening on "):
            log.show(Result((line,)))
        else:
            log.show(Result((line,), error=True))

    def launcher_lines(self, lines: list[str]) -> None:
        """A wrapped job's launcher printed lines: the command log shows them."""
        self._log.show(Result(tuple(f"[launcher] {line}" for line in lines)))
