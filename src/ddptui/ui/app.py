"""`DdptuiApp`: a pane per rank, a rank bar, and a command line that broadcasts in lockstep.

The app renders the core's state and forwards input; the `Session` owns every process.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Iterable
from dataclasses import replace

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.timer import Timer

from ddptui.core import commands
from ddptui.core.answers import answer_lines, tagged
from ddptui.core.batch import exit_status
from ddptui.core.launch import LaunchError, check_port
from ddptui.core.lockstep import Broadcast
from ddptui.core.pump import ORDERED_STORES
from ddptui.core.rootcause import Failure, root_cause
from ddptui.core.session import Session
from ddptui.core.state import Phase, RankState
from ddptui.core.targets import Line, TargetError, format_ranks, name_ranks
from ddptui.core.text import inert
from ddptui.core.wrap import fold_exports
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.command_log import CommandLog
from ddptui.ui.keys_footer import KeysFooter
from ddptui.ui.quit_screen import QuitScreen
from ddptui.ui.rank_bar import RankBar, has_crashed
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.stack_tree import StackTree
from ddptui.ui.state_grid import StateGrid
from ddptui.ui.watch_panel import WatchPanel

ANSWER_LINES = 12
"""Lines of a broadcast's answers shown in the command log at most (the panes have them all)."""
PAGE_SIZE = 8
"""Panes shown at once; more ranks are paged (F3/F4 move the focus across pages)."""
GRID_THRESHOLD = 8
"""Above this many ranks a state grid takes over: panes only for the ranks picked in it."""
REPLAY_BYTES = 128 * 1024
"""Output replayed into a pane mounted again (the core keeps every rank's output)."""
MISSING_KINDS = ("hang", "early exit")
"""Collective verdicts whose suspects are ranks the others wait for."""
KEYS = (
    "F2 broadcast/typing · F10 n · F11 s · Shift+F11 r · F5 c · F12 :interrupt · F8 :skip · "
    "F3/F4 previous/next rank · "
    "Ctrl+Q quit"
)


def grid_shape(count: int) -> tuple[int, int]:
    """Columns and rows for `count` panes."""
    if count <= 2:
        return count, 1
    if count <= 4:
        return 2, 2
    return (count + 1) // 2, 2


class DdptuiApp(App[int]):
    """The interactive debugger."""

    CSS_PATH = ["app.tcss", "rank_pane.tcss"]
    TITLE = "ddptui"
    BINDINGS = [
        Binding("f2", "toggle_broadcast", "Broadcast/typing", priority=True),
        Binding("f10", "step('n')", "Next (n)", priority=True),
        Binding("f11", "step('s')", "Step (s)", priority=True),
        Binding("shift+f11", "step('r')", "Return (r)", priority=True),
        Binding("f5", "step('c')", "Continue (c)", priority=True),
        Binding("f7", "until_collective", "To next collective", priority=True),
        Binding("f8", "skip", "Skip this breakpoint()", priority=True),
        Binding("f12", "interrupt", "Interrupt", priority=True),
        Binding("f3", "focus_rank(-1)", "Prev rank", priority=True),
        Binding("f4", "focus_rank(1)", "Next rank", priority=True),
        Binding("f6", "focus_rank(1, True)", "Crashed rank", priority=True),
        Binding("f9", "focus_grid", "State grid", show=False, priority=True),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, session: Session, grid_threshold: int = GRID_THRESHOLD) -> None:
        """Show `session`, which the app starts (its ranks are spawned once the panes have a size).

        With more than `grid_threshold` ranks, a `StateGrid` shows them all and panes are mounted
        only for the ranks picked in it (at most `PAGE_SIZE`).
        """
        super().__init__()
        self.session = session
        if session.spec.pump is None:  # a flood must not cost the loop a wake-up per pty read
            session.spec = replace(session.spec, pump=ORDERED_STORES)
        spec = self.spec = session.spec
        self.page = 0
        self.focused_rank = 0
        self.broadcasting = False
        self._typed_from: int | None = None
        """The pane whose `:` opened the command line: it gets the keys back after that line."""
        self.grid_threshold = grid_threshold
        self.panes = [
            RankPane(rank, columns=spec.columns, lines=spec.lines, history=spec.scrollback, id=f"rank-{rank}")
            for rank in range(spec.nproc)
        ]
        self.rank_bar = RankBar()
        self.state_grid = StateGrid(spec.nproc, id="state-grid") if spec.nproc > grid_threshold else None
        self.shown: tuple[int, ...] = tuple(range(min(spec.nproc, PAGE_SIZE)))
        """The ranks whose panes are mounted (with a state grid) or on the page shown."""
        self._panes_lock = asyncio.Lock()
        self.command_log = CommandLog()
        self.watch_panel = WatchPanel()
        self.command_bar = CommandBar()
        self._quitting = False
        self._states: list[RankState] = []
        """Every rank's state as last told; the rank bar shows it once per frame."""
        self._bar_stale = False
        self._flight: Timer | None = None
        """The rank bar's refresh: runs while a command is in flight or states change, rests otherwise."""
        self._marks_stale = True
        self._marks_found = 0
        """How many verdicts the grid's marks were last worked out with."""

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Rank bar, the state grid (many ranks), the grid of panes, the command line, the footer."""
        yield self.rank_bar
        yield self.watch_panel
        if self.state_grid is not None:
            yield self.state_grid
            for pane in self.panes[PAGE_SIZE:]:
                pane.display = False
        with Grid(id="panes"):
            yield from self.panes if self.state_grid is None else self.panes[:PAGE_SIZE]
        yield self.command_log
        yield self.command_bar
        yield KeysFooter()

    def pane(self, rank: int) -> RankPane:
        """The pane of a rank."""
        return self.panes[rank]

    def show_page(self, page: int, focus: int | None = None) -> None:
        """Show the panes of one page of ranks and lay them out as a grid (then focus `focus`)."""
        self.page = page
        first = page * PAGE_SIZE
        shown = range(first, min(first + PAGE_SIZE, self.spec.nproc))
        if self.state_grid is not None:
            self.show_ranks(shown, focus)
            return
        columns, rows = grid_shape(len(shown))
        grid = self.query_one("#panes", Grid)
        grid.styles.grid_size_columns, grid.styles.grid_size_rows = columns, rows
        for rank in range(self.spec.nproc):
            self.pane(rank).display = rank in shown
        pages = (self.spec.nproc + PAGE_SIZE - 1) // PAGE_SIZE
        self.sub_title = f"ranks {shown.start}-{shown.stop - 1} of {self.spec.nproc}" if pages > 1 else ""

    async def on_event(self, event: events.Event) -> None:
        """Every event; a key from the terminal first holds back the panes' flood repaints, so
        its echo is drawn at once during a log flood."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            RankPane.key_pressed()
        await super().on_event(event)

    async def on_mount(self) -> None:
        """Lay out, then start the job once the panes know their size."""
        self.show_page(0)
        self._states = [RankState() for _ in range(self.spec.nproc)]
        self.rank_bar.states = tuple(self._states)
        if self.panes:  # a wrapped job has none until its first rank connects
            self.pane(0).focus()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.shutdown)
        loop.add_signal_handler(signal.SIGINT, self.shutdown)  # `kill -INT`: the terminal's ^C is a key
        loop.add_signal_handler(signal.SIGHUP, self.hang_up)
        self._flight = self.set_interval(0.1, self._show_flight)
        if self.state_grid is not None:
            self.set_interval(0.25, self._mark_grid)
        self.call_after_refresh(self.start_session)

    def on_unmount(self) -> None:
        """Never leave a rank behind, however the app ends."""
        self.session.on_output.clear()
        self.session.on_state.clear()
        self.session.kill_now()

    @work(exclusive=True, group="session")
    async def start_session(self) -> None:
        """Spawn the ranks and wire their output and state to the panes."""
        self.session.on_output.append(self._rank_output)
        self.session.on_state.append(self._rank_state)
        self.session.on_notice.append(self._notice)
        for line in list(self.session.notices):  # said before the app was up (the launch's notes)
            self._notice(line)
        self.session.on_world.append(self._world)
        try:
            await self.session.start()
        except LaunchError as exc:
            self.exit(2, return_code=2, message=f"ddptui: error: {exc}")
            return
        if self.session.launcher is not None:
            self.session.launcher.on_lines.append(self._launcher_lines)
        for rank in range(self.spec.nproc):
            terminal = self.pane(rank).terminal
            self.session.resize(rank, terminal.columns, terminal.lines)
        gc.freeze()  # what exists now lives as long as the app: keep it out of collection pauses

    # -- core → view ------------------------------------------------------------------------
    def _rank_output(self, rank: int, data: bytes) -> None:
        """Hand bytes to the rank's pane (cheap: emulation happens on the pane's frame timer)."""
        self.pane(rank).feed(data)

    def _launcher_lines(self, lines: list[str]) -> None:
        """A wrapped job's launcher printed lines: the command log shows them."""
        self.command_log.show(commands.Result(tuple(f"[launcher] {line}" for line in lines)))

    def _world(self, size: int) -> None:
        """A wrapped job's first rank said how many ranks there are: a pane for each."""
        if self.panes and size == self.spec.nproc:
            return  # `ddptui listen --world-size N`: the panes exist since the start
        spec = self.spec = replace(self.spec, nproc=size)
        self.panes = [
            RankPane(rank, columns=spec.columns, lines=spec.lines, history=spec.scrollback, id=f"rank-{rank}")
            for rank in range(size)
        ]
        self._states = [RankState() for _ in range(size)]
        self.rank_bar.states = tuple(self._states)
        if size > self.grid_threshold:
            self.state_grid = StateGrid(size, id="state-grid")
        self.shown = tuple(range(min(size, PAGE_SIZE)))
        self._mount_world()

    @work(group="panes")
    async def _mount_world(self) -> None:
        """Mount the new panes (or the state grid, which mounts the panes picked in it)."""
        grid = self.query_one("#panes", Grid)
        if self.state_grid is not None:
            await self.mount(self.state_grid, before=grid)
            self.set_interval(0.25, self._mark_grid)
        else:
            await grid.mount_all(self.panes)
        self.show_page(0)
        if self.state_grid is None:
            self.pane(0).focus()

    def _notice(self, line: str) -> None:
        """Show a line about the session itself (a refused connection, logging stopped)."""
        if line == self.session.listen_line:  # `ddptui listen`: the line for the job, folded to fit
            width = max(self.command_log.scrollable_content_region.width, 40)
            self.command_log.show(commands.Result(tuple(fold_exports(self.session.listen_exports, width))))
        elif line.startswith("listening on "):
            self.command_log.show(commands.Result((line,)))
        else:
            self.command_log.show(commands.Result((line,), error=True))

    def _rank_state(self, rank: int, state: RankState) -> None:
        """Show a rank's new state in the bar and on its pane; a rank that crashes gets the keys."""
        states = self._states
        # Two states, not `bar.crashed` (a scan of every rank): 256 ranks stepping make 256 calls.
        crashed_before, focus_crashed = has_crashed(states[rank]), has_crashed(states[self.focused_rank])
        states[rank] = state
        self._bar_stale = self._marks_stale = True  # drawn once a frame: a step of N ranks is N events
        if self._flight is not None:
            self._flight.resume()
        if self.state_grid is not None:
            self.state_grid.set_state(rank, state)
        self._dress_pane(self.pane(rank), state)
        if crashed_before or not has_crashed(state) or self._quitting:
            return
        self._show_flight()  # the bar knows the crash now: F6 and the focus below read it
        # Keys being typed on the command line, or into another post-mortem, must not land in this
        # rank's pdb halfway through a line: say it instead.
        if self.broadcasting or focus_crashed:
            line = f"rank {rank} {state.describe()} · F6 goes to its pane"
            self.command_log.show(commands.Result((inert(line),), error=True))
        else:
            self.action_focus_rank(0, crashed=True)

    def _show_flight(self) -> None:
        """Show which ranks the broadcast in flight still waits for."""
        bar = self.rank_bar
        if self._bar_stale:
            self._bar_stale = False
            bar.states = tuple(self._states)
        bar.outstanding = self.session.lockstep.outstanding
        bar.in_flight = self.session.lockstep.command
        if not bar.in_flight and self._flight is not None:
            self._flight.pause()  # nothing moves until a rank's state does (an idle app costs nothing)

    # -- state grid (many ranks) -------------------------------------------------------------
    def on_state_grid_selected(self, event: StateGrid.Selected) -> None:
        """Give the ranks picked in the grid panes and the keys; broadcasts still go to every target."""
        ranks = sorted(event.ranks)
        if len(ranks) > PAGE_SIZE:
            line = f"{len(ranks)} ranks selected: panes for {format_ranks(set(ranks[:PAGE_SIZE]))}"
            self.command_log.show(commands.Result((line,)))
        self.show_ranks(ranks, focus=ranks[0])

    def show_ranks(self, ranks: Iterable[int], focus: int | None = None) -> None:
        """Mount panes for `ranks` (the first `PAGE_SIZE`), unmount the others (their output is kept)."""
        self.shown = tuple(sorted(set(ranks)))[:PAGE_SIZE]
        self.sub_title = f"panes: {name_ranks(set(self.shown))} of {self.spec.nproc}"
        if self.state_grid is not None:
            self.state_grid.shown = frozenset(self.shown)
        self._mount_panes(focus)

    @work(group="panes")
    async def _mount_panes(self, focus: int | None) -> None:
        """Make the mounted panes those of `shown`, in rank order; then type into `focus`.

        A removed widget cannot be mounted again: an unmounted pane is replaced by a new one,
        fed the tail of its rank's output, which the core keeps (see `_replayed_pane`).
        """
        async with self._panes_lock:
            grid = self.query_one("#panes", Grid)
            gone = [pane for pane in grid.query_children(RankPane) if pane.rank not in self.shown]
            await grid.remove_children(gone)
            for pane in gone:
                self.panes[pane.rank] = self._replayed_pane(pane)
            mounted = {pane.rank for pane in grid.query_children(RankPane)}
            new = [self.pane(rank) for rank in self.shown if rank not in mounted]
            for pane in self.panes:
                pane.display = pane.rank in self.shown
            await grid.mount_all(new)
            grid.sort_children(key=lambda widget: widget.rank if isinstance(widget, RankPane) else -1)
            grid.styles.grid_size_columns, grid.styles.grid_size_rows = grid_shape(len(self.shown))
        if focus is not None and focus in self.shown:
            self.pane(focus).focus()

    def _replayed_pane(self, old: RankPane) -> RankPane:
        """A new, unmounted pane for `old`'s rank, fed the tail of the rank's output."""
        rank, terminal = old.rank, old.terminal
        pane = RankPane(
            rank,
            columns=terminal.columns,
            lines=terminal.lines,
            history=self.spec.scrollback,
            id=f"rank-{rank}",
        )
        pane.display = False
        if rank >= len(self.session.ranks):
            return pane
        output = self.session.ranks[rank].output
        start = max(output.start, output.end - REPLAY_BYTES)
        data = output.since(start)
        if start > output.start:  # start at a line, not inside an escape sequence
            data = data[data.find(b"\n") + 1 :]
        pane.feed(data)
        return self._dress_pane(pane, self.session.ranks[rank].state)

    def _dress_pane(self, pane: RankPane, state: RankState) -> RankPane:
        """Title and classes of a rank's pane for its state (mounted or not)."""
        pane.border_title = Text(inert(f"rank {pane.rank} · {state.describe()}"))
        rank = self.session.ranks[pane.rank] if pane.rank < len(self.session.ranks) else None
        who = rank.identity if rank is not None else None
        if rank is not None:
            pane.source = rank.output  # a skipped flood's scrollback is emulated again from it
        if who is not None:
            pane.show_identity(inert(f"local rank {who.local_rank} · {who.host} · pid {who.pid}"))
        pane.set_class(not state.alive, "-exited")
        pane.set_class(has_crashed(state), "-crashed")
        return pane

    def _mark_grid(self) -> None:
        """Mark the root cause, and the ranks missing from a collective while others wait in it."""
        assert self.state_grid is not None
        found = self.session.verdicts.found  # only ever appended to
        if not self._marks_stale and len(found) == self._marks_found:
            return  # nothing changed (an idle app with 256 ranks must not scan them 4 times a second)
        self._marks_stale, self._marks_found = False, len(found)
        ranks = self.session.ranks
        failures = [Failure(r.index, r.failed_at, r.state) for r in ranks if r.failed_at is not None]
        waiting = any(rank.state.phase is Phase.WAITING for rank in ranks)
        missing = {r for v in found if v.kind in MISSING_KINDS for r in v.suspects} if waiting else set()
        self.state_grid.set_marks(root_cause(failures, found), missing)

    # -- view → core ------------------------------------------------------------------------
    def on_stack_tree_group_requested(self, event: StackTree.GroupRequested) -> None:
        """`g` on a branch of `:stacks`: name its ranks `branch` (`@branch n`, `:ranks branch`)."""
        self.session.groups["branch"] = event.ranks
        line = f"group branch: {name_ranks(event.ranks)} (@branch CMD, :ranks branch)"
        self.command_log.show(commands.Result((line,)))

    def on_rank_pane_input(self, event: RankPane.Input) -> None:
        """Keys typed in a pane go to that rank alone.

        But `:` as the first key at the rank's pdb prompt starts a ddptui command on the command
        line (pdb takes no line that starts with `:`); once it is entered, typing comes back here.
        """
        if self._typed_from == event.rank:  # typed (or pasted) before the command line had the keys
            self._type_on_command_line(event.data)
            return
        ranks = self.session.ranks
        if event.data[:1] == b":" and event.rank < len(ranks):
            rank = ranks[event.rank]
            if rank.state.at_prompt and rank.prompt_shown():  # nothing typed since the prompt
                self._typed_from = event.rank
                line = self.command_bar.input
                line.value, line.cursor_position = "", 0
                line.focus()
                self._type_on_command_line(event.data)
                return
        self.session.send_input(event.rank, event.data)

    def _type_on_command_line(self, data: bytes) -> None:
        """Keys that went to a pane after its `:` moved typing to the command line: Enter runs
        the line, Backspace and printable characters edit it, other keys are dropped."""
        line = self.command_bar.input
        for char in data.decode("utf-8", "replace"):
            if char in "\r\n":
                self.call_later(line.action_submit)
                return
            if char in "\x7f\b":
                line.action_delete_left()
            elif char.isprintable():
                line.insert_text_at_cursor(char)

    def on_rank_pane_resized(self, event: RankPane.Resized) -> None:
        """A pane's size is its rank's terminal size."""
        if self.session.ranks:
            self.session.resize(event.rank, event.columns, event.lines)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Follow the focus: a focused pane means typing goes to that rank.

        The event names the widget: `self.focused` asks the screen stack, which is empty when
        the event arrives as the app exits (seen under load).
        """
        focused = event.widget
        bar = self.command_bar
        if isinstance(focused, RankPane):
            self.focused_rank, self.broadcasting = focused.rank, False
            self._typed_from = None
        elif focused is bar.input:
            self.broadcasting = True
        bar.broadcast, bar.focused_rank = self.broadcasting, self.focused_rank

    def on_command_bar_submitted(self, event: CommandBar.Submitted) -> None:
        """Run a line from the command line (begun by `:` in a pane: typing goes back there)."""
        pane, self._typed_from = self._typed_from, None
        if pane is not None and pane in self.shown:
            self.pane(pane).focus()
        line = event.line.strip()
        try:
            parsed = self.session.parse(line)
        except TargetError as exc:
            self.command_log.show(commands.Result((str(exc),), error=True))
            return
        if parsed.kind == "ddptui":
            self.ddptui_command(parsed.text)
        elif parsed.kind == "pdb":
            self.broadcast(parsed)

    @work(group="commands")
    async def ddptui_command(self, text: str) -> None:
        """Run a `:` command and show its result in the command log."""
        self.command_log.echo(f":{text}")
        result = await commands.run(self.session, text)
        self.command_log.show(result)
        self.watch_panel.show(result.tables)
        if result.stack is not None:
            self.watch_panel.show_stack(result.stack)
        if text.split(" ", 1)[0] in ("help", "h", "?"):
            self.command_log.show(commands.Result((f"keys: {KEYS}",)))
        targets = self.session.targets
        self.command_bar.target = "all" if targets is None else name_ranks(targets)
        if result.quit:
            self.action_quit()

    @work(group="broadcast")
    async def broadcast(self, line: Line) -> None:
        """Send a pdb command to the target ranks in lockstep (queued behind one in flight)."""
        if not self.session.ranks or self._quitting:
            return
        sent, said = await commands.send(self.session, line)
        if sent is not None:
            self.command_log.echo(sent.command)
            self.command_log.show(commands.Result(tuple(self._answers(sent))))
        self.command_log.show(said)
        self.watch_panel.show(said.tables)

    def _answers(self, sent: Broadcast) -> list[str]:
        """What the ranks answered, identical answers once (`[ranks 0-3] 42`), cut to a few lines."""
        prompts = {rank.index: rank.prompt for rank in self.session.ranks}
        per_rank = {a.rank: answer_lines(a.output, prompts[a.rank], sent.command) for a in sent.replies}
        lines = tagged(per_rank)
        if len(lines) > ANSWER_LINES:
            lines = [*lines[: ANSWER_LINES - 1], f"… {len(lines) - ANSWER_LINES + 1} more lines in the panes"]
        return lines

    # -- actions ----------------------------------------------------------------------------
    def action_step(self, command: str) -> None:
        """Broadcast a stepping command to the target ranks."""
        self.broadcast(Line("pdb", command))

    def action_until_collective(self) -> None:
        """`:until-collective`: every target rank runs to its next collective; a table says if they agree."""
        self.ddptui_command("until-collective")

    def action_skip(self) -> None:
        """`:skip`: the breakpoint() where the target ranks stand stops no more."""
        self.ddptui_command("skip")

    def action_interrupt(self) -> None:
        """`:interrupt`: the target ranks that run stop where they stand."""
        self.ddptui_command("interrupt")

    def action_toggle_broadcast(self) -> None:
        """Switch typing between the command line (broadcast) and the focused rank's pane."""
        if self.broadcasting:
            self.pane(self.focused_rank).focus()
        else:
            self.command_bar.input.focus()

    def action_focus_rank(self, delta: int, crashed: bool = False) -> None:
        """Type into the previous/next rank, paging when it is not shown.

        With `crashed`, among crashed ranks only: from a pane of one, the next; else the first.
        """
        ranks = self.rank_bar.crashed if crashed else list(range(self.spec.nproc))
        if not ranks:
            self.command_log.show(commands.Result(("no rank has crashed",)))
            return
        if self.broadcasting or self.focused_rank not in ranks:
            rank = ranks[0] if crashed else self.focused_rank
        else:
            rank = ranks[(ranks.index(self.focused_rank) + delta) % len(ranks)]
        if self.state_grid is not None:
            if rank not in self.shown:
                self.show_page(rank // PAGE_SIZE, focus=rank)
                return
        elif rank // PAGE_SIZE != self.page:
            self.show_page(rank // PAGE_SIZE)
        self.call_after_refresh(self.pane(rank).focus)

    def action_focus_grid(self) -> None:
        """Move the keys to the state grid (there is one above `grid_threshold` ranks)."""
        if self.state_grid is not None:
            self.state_grid.focus()

    def action_quit(self) -> None:  # type: ignore[override]
        """Quit, asking first while ranks are alive (saying what each is doing)."""
        alive = tuple(rank.state for rank in self.session.live(range(self.spec.nproc)))
        if not alive:
            self.shutdown()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.shutdown()

        leave = self.spec.listen is not None and self.spec.on_disconnect == "continue"
        self.push_screen(QuitScreen(alive, leave), answered)

    def shutdown(self) -> None:
        """End every rank, then exit."""
        if not self._quitting:
            self._quitting = True
            self._end_session()

    def hang_up(self) -> None:
        """The terminal is gone: end every rank, then leave without touching the terminal.

        Textual's own shutdown writes to the terminal to restore it, and blocks forever once the
        terminal has gone away.
        """
        self._quitting = True
        self._hang_up()

    @work(exclusive=True, group="session")
    async def _hang_up(self) -> None:
        """Close the session and exit the process at once (status 128 + SIGHUP)."""
        await self.session.close()
        os._exit(128 + signal.SIGHUP)

    @work(exclusive=True, group="session")
    async def _end_session(self) -> None:
        """Close the session (ends every rank process tree) and exit with the job's status."""
        self.notify("ending every rank…", timeout=3)
        await self.session.close()
        self.exit(exit_status([rank.state for rank in self.session.ranks]))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        """Every binding in the command palette too."""
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Broadcast/typing (F2)",
            "Type into the command line or the focused pane",
            self.action_toggle_broadcast,
        )
        for key, command, name in (
            ("F10", "n", "Next"),
            ("F11", "s", "Step"),
            ("Shift+F11", "r", "Return"),
            ("F5", "c", "Continue"),
        ):
            yield SystemCommand(
                f"{name} ({key})",
                f"Broadcast `{command}` to the target ranks",
                lambda c=command: self.action_step(c),
            )
        yield SystemCommand(
            "Skip this breakpoint() (F8)",
            "The breakpoint() where the target ranks stand stops no more (:skip)",
            self.action_skip,
        )
        yield SystemCommand(
            "Interrupt (F12)",
            "The target ranks that run stop at the line each runs (:interrupt)",
            self.action_interrupt,
        )
        yield SystemCommand(
            "Previous rank (F3)", "Type into the previous rank", lambda: self.action_focus_rank(-1)
        )
        yield SystemCommand("Next rank (F4)", "Type into the next rank", lambda: self.action_focus_rank(1))


def run_app(session: Session) -> int:
    """Run the app; print each rank's last state after it closes; return the exit status."""
    spec = session.spec
    if spec.master_port is not None:
        check_port(spec.master_addr, spec.master_port)  # a one-line error before the screen opens
    if spec.listen is not None and spec.listen[1]:
        check_port(*spec.listen, option="--port")
    app = DdptuiApp(session)
    status = app.run()
    app.session.kill_now()
    if app.return_code == 2 or status is None:
        return app.return_code or 1
    for line in app.session.summary():
        print(line, file=sys.stdout)
    return status
