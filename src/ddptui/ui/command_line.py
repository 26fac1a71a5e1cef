"""`CommandLine`: what a line entered on the command line runs, and what the command log shows of it.

A `:` line is a ddptui command; any other line is a pdb command broadcast to the target ranks in
lockstep, whose answers the command log shows once per distinct answer.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ddptui.core.commands import registry as commands
from ddptui.core.model.answers import answer_lines, tagged
from ddptui.core.model.targets import Line, TargetError, name_ranks
from ddptui.core.session.lockstep import Broadcast
from ddptui.ui.actions import help_line

if TYPE_CHECKING:
    from ddptui.ui.app import DdptuiApp

ANSWER_LINES = 12
"""Lines of a broadcast's answers shown in the command log at most (the panes have them all)."""


class CommandLine:
    """Runs the app's command lines: `:` commands and pdb broadcasts (the app's workers await these)."""

    def __init__(self, app: DdptuiApp) -> None:
        self._app = app

    def run_line(self, line: str) -> None:
        """Parse a line from the command line and start what it says (a `:` command or a broadcast)."""
        app = self._app
        try:
            parsed = app.session.parse(line)
        except TargetError as exc:
            app.command_log.show(commands.Result((str(exc),), error=True))
            return
        if parsed.kind == "ddptui":
            app.ddptui_command(parsed.text)
        elif parsed.kind == "pdb":
            app.broadcast(parsed)

    async def ddptui_command(self, text: str) -> None:
        """Run a `:` command and show its result in the command log."""
        app = self._app
        app.command_log.echo(f":{text}")
        result = await commands.run(app.session, text)
        app.command_log.show(result)
        app.watch_panel.show(result.tables)
        if result.stack is not None:
            app.watch_panel.show_stack(result.stack)
        if text.split(" ", 1)[0] in ("help", "h", "?"):
            app.command_log.show(commands.Result((f"keys: {help_line()}",)))
        targets = app.session.targets
        app.command_bar.target = "all" if targets is None else name_ranks(targets)
        if result.quit:
            app.action_quit()

    async def broadcast(self, line: Line) -> None:
        """Send a pdb command to the target ranks in lockstep (queued behind one in flight)."""
        app = self._app
        if not app.session.ranks or app._quitting:
            return
        sent, said = await commands.send(app.session, line, functools.partial(self._sent, line))
        if sent is not None:
            app.command_log.show(commands.Result(tuple(self.answers(sent))))
        else:  # held back (the divergence guard, `restart`...): what was typed, then why
            app.command_log.echo(line.echo)
        app.command_log.show(said)
        app.watch_panel.show(said.tables)

    def _sent(self, line: Line, sent: Broadcast) -> None:
        """The command went out: its echo, as typed (and the ranks it skipped), come before what
        it sets off (a crash said while the ranks run), its answers once they are all back."""
        self._app.command_log.echo(line.echo)
        self._app.command_log.show(commands.Result(commands.sending_lines(sent)))

    def answers(self, sent: Broadcast) -> list[str]:
        """What the ranks answered, identical answers once (`[ranks 0-3] 42`), cut to a few lines."""
        prompts = {rank.index: rank.prompt for rank in self._app.session.ranks}
        per_rank = {a.rank: answer_lines(a.output, prompts[a.rank], sent.command) for a in sent.replies}
        lines = tagged(per_rank)
        if len(lines) > ANSWER_LINES:
            lines = [*lines[: ANSWER_LINES - 1], f"… {len(lines) - ANSWER_LINES + 1} more lines in the panes"]
        return lines
