"""`DdptuiApp`: a pane per rank, a rank bar, and a command line that broadcasts in lockstep.

The app renders the core's state and forwards input; the `Session` owns every process.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import signal
import sys
from collections.abc import Iterable
from typing import ClassVar

from textual import events, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen

from ddptui.core.commands import registry as commands
from ddptui.core.commands.context import MAX_STOPS, Context
from ddptui.core.commands.job import NOT_DETACHED
from ddptui.core.model.state import RankState
from ddptui.core.model.targets import Line, format_ranks, name_ranks
from ddptui.core.model.topology import Topology
from ddptui.core.session.rank import Rank
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchError, check_ports
from ddptui.core.transport.pump import ORDERED_STORES
from ddptui.ui import actions, messages, palette
from ddptui.ui.colon_typing import ColonTyping
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.command_line import CommandLine
from ddptui.ui.command_log import CommandLog
from ddptui.ui.keys_footer import KeysFooter
from ddptui.ui.pane_grid import PAGE_SIZE, PaneGrid, PaneSize, grid_shape
from ddptui.ui.pane_turns import TURNS
from ddptui.ui.quitting import Quitting
from ddptui.ui.rank_bar import RankBar
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.rank_states import RankStates
from ddptui.ui.session_notes import SessionNotes
from ddptui.ui.stack_tree import StackTree
from ddptui.ui.state_grid import StateGrid
from ddptui.ui.typing_focus import TypingFocus
from ddptui.ui.watch_panel import WatchPanel

__all__ = ["GRID_THRESHOLD", "PAGE_SIZE", "DdptuiApp", "grid_shape", "run_app"]

GRID_THRESHOLD = 8
"""Above this many ranks a state grid takes over: panes only for the ranks picked in it."""


class DdptuiApp(App[int]):
    """The interactive debugger."""

    CSS_PATH = ["app.tcss", "rank_pane.tcss"]
    TITLE = "ddptui"
    BINDINGS: ClassVar[list[BindingType]] = actions.bindings()

    def __init__(
        self, session: Session, grid_threshold: int = GRID_THRESHOLD, context: Context | None = None
    ) -> None:
        """Show `session`, which the app starts (its ranks are spawned once the panes have a size).

        With more than `grid_threshold` ranks, a `StateGrid` shows them all and panes are mounted
        only for the ranks picked in it (at most `PAGE_SIZE`).
        """
        super().__init__()
        self.session = session
        self.context = context or Context.of(session)
        """What `:` commands act on: the session, its findings, the watches."""
        self.started = asyncio.Event()
        """Set once the job has started (or could not: the app then exits with its error)."""
        self.launch_error = ""
        session.default_pump(ORDERED_STORES)  # a flood must not cost the loop a wake-up per pty read
        spec = session.spec
        self.grid_threshold = grid_threshold
        self.rank_bar = RankBar()
        self.state_grid = StateGrid(spec.nproc, id="state-grid") if spec.nproc > grid_threshold else None
        size = PaneSize(spec.columns, spec.lines, spec.scrollback)
        picking = self.state_grid is not None
        self.pane_grid = PaneGrid(size, spec.nproc, self._rank_of, picking=picking, id="panes")
        self.command_log = CommandLog()
        self.watch_panel = WatchPanel()
        self.command_bar = CommandBar()
        end = functools.partial(self.run_worker, group="session", exclusive=True)
        self.quitting = Quitting(session, end, self.exit, functools.partial(self.notify, timeout=3))
        """How the app ends: asked first, every rank ended, the job's status."""
        self._rank_states = RankStates(self.context, self.rank_bar, self.post_message, self.set_timer)
        self._typing = ColonTyping(self.command_bar, self._fresh_prompt, session.send_input)
        self.typing_focus = TypingFocus(self.command_bar, self.pane_grid, self._typing)
        """Where typing goes: the focused rank's pane, or the command line (a broadcast)."""
        self._notes = SessionNotes(session, self.command_log)
        self._command_line = CommandLine(self.context, self.command_log, self.watch_panel, self.command_bar)

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Rank bar, the state grid (many ranks), the grid of panes, the command line, the footer."""
        yield self.rank_bar
        yield self.watch_panel
        if self.state_grid is not None:
            yield self.state_grid
        yield self.pane_grid
        yield self.command_log
        yield self.command_bar
        yield KeysFooter()

    @property
    def panes(self) -> list[RankPane]:
        """Every rank's pane, mounted or not."""
        return self.pane_grid.panes

    def pane(self, rank: int) -> RankPane:
        """The pane of a rank."""
        return self.pane_grid.pane(rank)

    def _rank_of(self, index: int) -> Rank | None:
        """The session's rank of an index, None before it has one."""
        ranks = self.session.ranks
        return ranks[index] if index < len(ranks) else None

    async def on_event(self, event: events.Event) -> None:
        """Every event; a key from the terminal first holds back the panes' flood repaints, so
        its echo is drawn at once during a log flood."""
        if isinstance(event, events.Key) and not event.is_forwarded:
            TURNS.key_pressed()
        await super().on_event(event)

    async def on_mount(self) -> None:
        """Lay out, then start the job once the panes know their size."""
        self.pane_grid.show_page(0)
        self._rank_states.reset(self.pane_grid.count)
        if self.panes:  # a wrapped job has none until its first rank connects
            self.pane(0).focus()
        loop = asyncio.get_running_loop()
        quitting = self.quitting
        loop.add_signal_handler(signal.SIGTERM, quitting.shutdown)
        loop.add_signal_handler(signal.SIGINT, quitting.shutdown)  # `kill -INT`: the terminal's ^C is a key
        loop.add_signal_handler(signal.SIGHUP, quitting.hang_up)
        self._rank_states.flight = self.set_interval(0.1, self._rank_states.show_flight)
        if self.state_grid is not None:
            self.set_interval(0.25, functools.partial(self._rank_states.mark, self.state_grid))
        self.call_after_refresh(self.start_session)

    def on_unmount(self) -> None:
        """Never leave a rank behind, however the app ends."""
        self.session.on_output.clear()
        self.session.on_state.clear()
        if self._topology in self.session.topology_reader.on_change:  # others may listen too
            self.session.topology_reader.on_change.remove(self._topology)
        self.session.kill_now()

    @work(exclusive=True, group="session")
    async def start_session(self) -> None:
        """Spawn the ranks and wire their output and state to the panes."""
        self.session.on_output.append(self._rank_output)
        self.session.on_state.append(self._rank_state)
        self._notes.listen()
        self.session.on_world.append(self._world)
        self.session.topology_reader.on_change.append(self._topology)
        try:
            await self.session.start()
        except LaunchError as exc:
            self.launch_error = str(exc)
            self.exit(2, return_code=2, message=f"ddptui: error: {exc}")
            return
        finally:
            self.started.set()
        self._notes.listen_to_launcher()
        for rank in range(self.pane_grid.count):
            terminal = self.pane(rank).terminal
            self.session.resize(rank, terminal.columns, terminal.lines)
        gc.freeze()  # what exists now lives as long as the app: keep it out of collection pauses

    # -- core → view ------------------------------------------------------------------------
    def _rank_output(self, rank: int, data: bytes) -> None:
        """Hand bytes to the rank's pane (cheap: emulation happens on the pane's frame timer)."""
        self.pane(rank).feed(data)

    def _rank_state(self, rank: int, state: RankState) -> None:
        """Show a rank's new state in the bar, the grid and on its pane; a crash may take the keys."""
        focus = self.typing_focus
        keys_free = not (focus.broadcasting or self._rank_states.crashed(focus.rank))
        self._rank_states.tell(rank, state, keys_free)
        if self.state_grid is not None:
            self.state_grid.set_state(rank, state)
        self.pane_grid.dress(rank, state)

    def _topology(self, topology: Topology) -> None:
        """The ranks told more of the job's meshes: panes, the bar and the grid say coordinates."""
        self.pane_grid.topology = topology
        self.rank_bar.mesh = topology.mesh
        if self.state_grid is not None:
            self.state_grid.mesh = topology.mesh

    def on_crash_takes_keys(self, event: messages.CrashTakesKeys) -> None:
        """A rank crashed while the keys were free: they go to its post-mortem (as F6)."""
        if not self.quitting.started:
            self.pane_grid.focus_rank(event.rank)

    def on_crashes_said(self, event: messages.CrashesSaid) -> None:
        """Ranks crashed while the keys were in use: the command log says which, and how."""
        if not self.quitting.started:
            self.command_log.show(commands.Result(event.lines, error=True))

    def _world(self, size: int) -> None:
        """A wrapped job's first rank said how many ranks there are: a pane for each."""
        if self.panes and size == self.pane_grid.count:
            return  # `ddptui listen --world-size N`: the panes exist since the start
        self._rank_states.reset(size)
        if size > self.grid_threshold:
            self.state_grid = StateGrid(size, id="state-grid")
            self.state_grid.mesh = self.session.topology.mesh
        self.pane_grid.set_world(size, picking=self.state_grid is not None)
        self._mount_world()

    @work(group="panes")
    async def _mount_world(self) -> None:
        """Mount the new panes (or the state grid, which mounts the panes picked in it)."""
        if self.state_grid is not None:
            await self.mount(self.state_grid, before=self.pane_grid)
            self.set_interval(0.25, functools.partial(self._rank_states.mark, self.state_grid))
        await self.pane_grid.mount_world()

    # -- state grid (many ranks) -------------------------------------------------------------
    def on_state_grid_selected(self, event: StateGrid.Selected) -> None:
        """Give the ranks picked in the grid panes and the keys; broadcasts still go to every target."""
        ranks = sorted(event.ranks)
        if len(ranks) > PAGE_SIZE:
            line = f"{len(ranks)} ranks selected: panes for {format_ranks(set(ranks[:PAGE_SIZE]))}"
            self.command_log.show(commands.Result((line,)))
        self.pane_grid.show_ranks(ranks, focus=ranks[0])

    def on_pane_grid_shown(self, event: PaneGrid.Shown) -> None:
        """Other ranks have panes: the subtitle says which, the state grid draws them underlined."""
        self.sub_title = event.caption
        if self.state_grid is not None:
            self.state_grid.shown = frozenset(event.ranks)

    # -- view → core ------------------------------------------------------------------------
    def on_stack_tree_group_requested(self, event: StackTree.GroupRequested) -> None:
        """`g` on a branch of `:stacks`: name its ranks `branch` (`@branch n`, `:ranks branch`)."""
        self.session.set_group("branch", event.ranks)
        line = f"group branch: {name_ranks(event.ranks)} (@branch CMD, :ranks branch)"
        self.command_log.show(commands.Result((line,)))

    def on_rank_pane_input(self, event: RankPane.Input) -> None:
        """Keys typed in a pane go to that rank alone, but a `:` at its prompt to the command line."""
        self._typing.pane_input(event.rank, event.data)

    def _fresh_prompt(self, rank: int) -> bool:
        """`rank` stands at its pdb prompt and nothing was typed since the prompt was shown."""
        ranks = self.session.ranks
        return rank < len(ranks) and ranks[rank].state.at_prompt and ranks[rank].prompt_shown()

    def on_rank_pane_resized(self, event: RankPane.Resized) -> None:
        """A pane's size is its rank's terminal size."""
        if self.session.ranks:
            self.session.resize(event.rank, event.columns, event.lines)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Follow the focus: a focused pane means typing goes to that rank.

        The event names the widget: `self.focused` asks the screen stack, which is empty when
        the event arrives as the app exits (seen under load).
        """
        self.typing_focus.follow(event.widget)

    def on_command_bar_submitted(self, event: CommandBar.Submitted) -> None:
        """Run a line from the command line (begun by `:` in a pane: typing goes back there)."""
        pane, self._typing.typed_from = self._typing.typed_from, None
        if pane is not None and pane in self.pane_grid.shown:
            self.pane(pane).focus()
        line = self._command_line.parse(event.line.strip())
        if line is None:
            return
        if line.kind == "ddptui":
            self.ddptui_command(line.text)
        elif line.kind == "pdb":
            self.broadcast(line)

    @work(group="commands")
    async def ddptui_command(self, text: str) -> None:
        """Run a `:` command and show its result in the command log (`:quit` asks to quit)."""
        result = await self._command_line.ddptui_command(text)
        if result.quit:
            self.action_quit()
        elif result.detach:
            self.action_detach()

    @work(group="broadcast")
    async def broadcast(self, line: Line) -> None:
        """Send a pdb command to the target ranks in lockstep (queued behind one in flight)."""
        if not self.quitting.started:
            await self._command_line.broadcast(line)

    # -- actions ----------------------------------------------------------------------------
    def action_step(self, command: str) -> None:
        """Broadcast a stepping command to the target ranks."""
        self.broadcast(Line("pdb", command))

    def action_command(self, text: str) -> None:
        """Run a `:` command, as typed on the command line (F7, F8, F12: see `actions.ACTIONS`)."""
        self.ddptui_command(text)

    def action_interrupt(self) -> None:
        """F12: stop a running `:until`; with none, stop the target ranks that run (`:interrupt`)."""
        if not self._command_line.stop_until():
            self.ddptui_command("interrupt")

    def action_stop_until(self) -> None:
        """Escape: stop a running `:until` once its ranks are back."""
        self._command_line.stop_until()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Escape is the app's only while an `:until` runs; otherwise it goes on to the pane."""
        return action != "stop_until" or self.context.hunting is not None

    def action_toggle_broadcast(self) -> None:
        """Switch typing between the command line (broadcast) and the focused rank's pane."""
        self.typing_focus.toggle()

    def action_focus_rank(self, delta: int, crashed: bool = False) -> None:
        """Type into the previous/next rank, paging when it is not shown.

        With `crashed`, among crashed ranks only: from a pane of one, the next; else the first.
        """
        ranks = self.rank_bar.crashed if crashed else list(range(self.pane_grid.count))
        if ranks:
            self.typing_focus.move(ranks, delta, crashed)
        else:
            self.command_log.show(commands.Result(("no rank has crashed",)))

    def action_focus_grid(self) -> None:
        """Move the keys to the state grid (there is one above `grid_threshold` ranks)."""
        if self.state_grid is not None:
            self.state_grid.focus()

    def summary(self) -> list[str]:
        """Each rank's last state, as printed when the app ends (ranks in the same state on one
        line above `grid_threshold`)."""
        return self.context.findings.summary(grouped=len(self.session.ranks) > self.grid_threshold)

    def action_detach(self) -> None:
        """Leave the session running and this terminal (a detached session's app only)."""
        if self.context.leave is None:
            self.command_log.show(commands.Result((NOT_DETACHED,), error=True))
        else:
            self.context.leave()

    def action_quit(self) -> None:  # type: ignore[override]
        """Quit, asking first while ranks are alive (saying what each is doing)."""
        self.quitting.ask(range(self.pane_grid.count), self.push_screen)

    def shutdown(self) -> None:
        """End every rank, then exit."""
        self.quitting.shutdown()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:  # type: ignore[type-arg]
        """Textual's commands, then the app's (`palette`; Textual's `Quit` is ours, with its key)."""
        yield from (command for command in super().get_system_commands(screen) if command.title != "Quit")
        yield from palette.commands(self.run_action, self.command_bar.begin)


def run_app(session: Session, max_stops: int = MAX_STOPS) -> int:
    """Run the app; print each rank's last state after it closes; return the exit status.

    `max_stops`: the continues an `:until` makes at most (`--max-stops`)."""
    check_ports(session.spec)
    app = DdptuiApp(session)
    app.context.max_stops = max_stops
    status = app.run()
    app.session.kill_now()
    if app.return_code == 2 or status is None:
        return app.return_code or 1
    for line in app.summary():
        print(line, file=sys.stdout)
    return status
