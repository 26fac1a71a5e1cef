"""`CommandLine`: what a line entered on the command line runs, and what the command log shows of it.

A `:` line is a ddptui command; any other line is a pdb command broadcast to the target ranks in
lockstep, whose answers the command log shows once per distinct answer.
"""

from __future__ import annotations

import functools

from ddptui.core.commands import registry as commands
from ddptui.core.commands.context import Context
from ddptui.core.model.answers import answer_lines, tagged
from ddptui.core.model.targets import Line, TargetError, name_ranks
from ddptui.core.session.lockstep import Broadcast
from ddptui.ui.actions import help_line
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.command_log import CommandLog
from ddptui.ui.watch_panel import WatchPanel

ANSWER_LINES = 12
"""Lines of a broadcast's answers shown in the command log at most (the panes have them all)."""


class CommandLine:
    """Runs the command line's lines on the session and shows what they said (the app's workers
    await these, and decide what a result asks of the app, such as quitting)."""

    def __init__(self, context: Context, log: CommandLog, watch: WatchPanel, bar: CommandBar) -> None:
        """Lines run in `context` (its session); `log` and `watch` show what they said, `bar` the targets."""
        self._context = context
        self._session = context.session
        self._log = log
        self._watch = watch
        self._bar = bar
        self._typed_targets: tuple[frozenset[int], str] | None = None
        """The default targets as last set by mesh coordinates (`:ranks tp=0`), and those words."""
        context.on_progress.append(self._progress)

    def parse(self, line: str) -> Line | None:
        """A line from the command line, read (None, and the error shown, when it does not parse)."""
        try:
            return self._session.parse(line)
        except TargetError as exc:
            self._log.show(commands.Result((str(exc),), error=True))
            return None

    async def ddptui_command(self, text: str) -> commands.Result:
        """Run a `:` command, show its result in the command log, and return it."""
        log = self._log
        log.echo(f":{text}")
        result = await commands.run(self._context, text)
        log.show(result)
        self._watch.show(result.tables)
        if result.stack is not None:
            self._watch.show_stack(result.stack)
        if text.split(" ", 1)[0] in ("help", "h", "?"):
            log.show(commands.Result((f"keys: {help_line()}",)))
        self._bar.target = self._target_words(text, result)
        return result

    def _progress(self, text: str) -> None:
        """A long command's progress (`:until EXPR … stop 17…`), shown on the command bar."""
        self._bar.progress = text

    def stop_until(self) -> bool:
        """Stop a running `:until` once its ranks are back (F12, Escape); False when none runs."""
        if not self._context.interrupt():
            return False
        self._log.show(commands.Result((f"stopping {self._bar.progress or ':until'}",)))
        return True

    def _target_words(self, text: str, result: commands.Result) -> str:
        """The default targets in words: `all`, `ranks 0,2`, or as set by coordinates `tp=0 (ranks 0,2)`."""
        targets = self._session.targets
        if targets is None:
            return "all"
        name, _, arg = text.strip().partition(" ")
        ranks = commands.COMMANDS.get(name)
        if ranks is not None and ranks.name == "ranks" and "=" in arg and not result.error:
            self._typed_targets = (targets, arg.strip())
        typed = self._typed_targets
        return f"{typed[1]} ({name_ranks(targets)})" if typed and typed[0] == targets else name_ranks(targets)

    async def broadcast(self, line: Line) -> None:
        """Send a pdb command to the target ranks in lockstep (queued behind one in flight)."""
        session, log = self._session, self._log
        if not session.ranks:
            return
        sent, said = await commands.send(self._context, line, functools.partial(self._sent, line))
        if sent is not None:
            log.show(commands.Result(tuple(self.answers(sent))))
        else:  # held back (the divergence guard, `restart`...): what was typed, then why
            log.echo(line.echo)
        log.show(said)
        self._watch.show(said.tables)

    def _sent(self, line: Line, sent: Broadcast) -> None:
        """The command went out: its echo, as typed (and the ranks it skipped), come before what
        it sets off (a crash said while the ranks run), its answers once they are all back."""
        self._log.echo(line.echo)
        self._log.show(commands.Result(commands.sending_lines(sent)))

    def answers(self, sent: Broadcast) -> list[str]:
        """What the ranks answered, identical answers once (`[ranks 0-3] 42`), cut to a few lines."""
        prompts = {rank.index: rank.prompt for rank in self._session.ranks}
        per_rank = {a.rank: answer_lines(a.output, prompts[a.rank], sent.command) for a in sent.replies}
        lines = tagged(per_rank)
        if len(lines) > ANSWER_LINES:
            lines = [*lines[: ANSWER_LINES - 1], f"… {len(lines) - ANSWER_LINES + 1} more lines in the panes"]
        return lines
