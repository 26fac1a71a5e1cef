"""What a new user meets first: a crash takes the keys, the quit question, hints, a small terminal."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from conftest import SCRIPTS, steady_identities, until
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Label
from textual.widgets._toast import Toast

from ddptui.core.commands.registry import Result
from ddptui.core.diagnosis.compare import compare
from ddptui.core.model.state import Crash, Frame, Phase, RankState
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.command_bar import BROADCAST_HINT
from ddptui.ui.command_log import CommandLog
from ddptui.ui.quit_screen import QuitScreen, question
from ddptui.ui.rank_bar import RankBar
from ddptui.ui.rank_pane import RankPane

SNAPSHOT_DIR = Path("/tmp/ddptui-snapshot-polish")
"""Outside the working directory, so paths show as bare file names whoever runs the tests."""


def spec(script: Path, nproc: int = 2) -> LaunchSpec:
    """A plain-Python job."""
    return LaunchSpec(target=str(script), nproc=nproc, stall_timeout=5)


def all_paused(app: DdptuiApp) -> bool:
    """Every rank at its prompt, the prompt drawn in its pane."""
    ranks = app.session.ranks
    return bool(ranks) and all(
        r.state.phase is Phase.PAUSED and f"(Pdb r{r.index})" in app.pane(r.index).terminal.text()
        for r in ranks
    )


def focused_rank(app: DdptuiApp) -> int | None:
    """The rank whose pane has the keys, once the app has heard of it (F3/F4 count from it); or None."""
    focused = app.focused
    return focused.rank if isinstance(focused, RankPane) and app.typing_focus.rank == focused.rank else None


def in_post_mortem(app: DdptuiApp, rank: int) -> bool:
    """The rank crashed and its post-mortem prompt is open."""
    state = app.session.ranks[rank].state
    return state.crash is not None and state.at_prompt


def continue_all(app: DdptuiApp) -> None:
    """`c` into every rank's own terminal (a broadcast `c` would be held back: the ranks diverge)."""
    for rank in app.session.ranks:
        app.session.send_input(rank.index, b"c\n")


async def test_a_crash_takes_the_keys_once_and_f6_goes_back_to_it() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "diverge.py", nproc=3)))
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        assert focused_rank(app) == 0
        continue_all(app)
        await until(pilot, lambda: focused_rank(app) == 2)
        assert app.pane(2).has_class("-crashed")
        await until(pilot, lambda: in_post_mortem(app, 2))
        await pilot.press("f3")
        await until(pilot, lambda: focused_rank(app) == 1)
        app.session.send_input(2, b"q\n")  # leaves post-mortem: a new state, but no new crash
        await until(pilot, lambda: not app.session.ranks[2].state.alive)
        await pilot.pause(0.2)
        assert focused_rank(app) == 1
        await pilot.press("f6")
        await until(pilot, lambda: focused_rank(app) == 2)
        app.session.kill_now()


async def test_a_crash_while_typing_a_broadcast_is_said_not_focused() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "diverge.py", nproc=3)))
    async with app.run_test(size=(150, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2", "p")  # halfway through a broadcast line when rank 2 crashes
        continue_all(app)
        log = app.command_log
        await until(pilot, lambda: any("rank 2 crashed ValueError" in line for line in log.lines_text()))
        assert app.focused is app.command_bar.input and app.command_bar.input.value == "p"
        assert any("F6" in line for line in log.lines_text())
        await pilot.press("f6")
        await until(pilot, lambda: focused_rank(app) == 2)
        app.session.kill_now()


def test_the_quit_question_counts_live_ranks_by_what_they_do() -> None:
    here = Frame("train.py", 3)
    states = (
        RankState().paused(here, False),
        RankState().running().crashed(Crash("ValueError", "no", here)).paused(here, True),
        RankState().running(),
        RankState().paused(here, False),
    )
    assert question(states) == "End 2 paused, 1 crashed, 1 running rank(s) and quit?"
    assert (
        question(states, leave=True)
        == "Leave 2 paused, 1 crashed, 1 running rank(s) running undebugged and quit?"
    )


async def test_quit_dialog_says_what_it_ends() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        text = str(app.screen.query_one("#question", Label).render())
        assert text == "End 2 paused rank(s) and quit? [y/n]"
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, timeout=10)


async def test_the_command_line_hint_follows_where_keys_go() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    async with app.run_test(size=(120, 30)) as pilot:
        field = app.command_bar.input
        await until(pilot, lambda: all_paused(app))
        assert field.placeholder == "F2: type here to broadcast to all · or :cmd in a pane"
        await pilot.press("f2")
        await until(pilot, lambda: field.placeholder == BROADCAST_HINT)
        await pilot.press(*":ranks 1", "enter", "f2")
        await until(pilot, lambda: field.placeholder.startswith("F2: type here to broadcast to rank 1 ·"))
        app.session.kill_now()


async def test_toasts_stay_off_the_panes() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: all_paused(app))
        for line in ("ending every rank…", "a second toast", "a third, with a title, long enough to wrap"):
            app.notify(line, title="note" if "title" in line else "", timeout=30)
        await pilot.pause(0.2)
        on_top = {(x, y): app.screen.get_widget_at(x, y)[0] for x in range(80) for y in range(24)}
        assert any(isinstance(widget, Toast) for widget in on_top.values())
        for pane in app.query(RankPane):
            cells = [
                (x, y)
                for x in range(pane.region.x, pane.region.right)
                for y in range(pane.region.y, pane.region.bottom)
            ]
            assert all(on_top[cell] is pane for cell in cells)
        app.session.kill_now()


def test_eighty_by_twenty_four_keeps_the_rank_bar_and_divergence(snap_compare: Callable[..., bool]) -> None:
    SNAPSHOT_DIR.mkdir(exist_ok=True)
    script = SNAPSHOT_DIR / "diverging_ranks_at_eighty_columns.py"  # too long for full chips
    shutil.copy(SCRIPTS / "diverge.py", script)
    app = DdptuiApp(Session(spec(script, nproc=3)))

    async def settle(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: all_paused(app))
        bar = app.query_one(RankBar)
        await until(pilot, lambda: "ranks diverge: 0 at line 10 · 1-2 at line 13" in str(bar.render()))
        await until(pilot, lambda: all(p.terminal.pending == 0 for p in app.query(RankPane)))
        await steady_identities(pilot, app)
        await pilot.pause(0.2)

    try:
        assert snap_compare(app, terminal_size=(80, 24), run_before=settle)
    finally:
        app.session.kill_now()


async def test_f12_stops_the_running_ranks_in_their_loop() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "spins.py")))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f5")
        await until(pilot, lambda: all(b"spinning" in r.output.tail(4096) for r in app.session.ranks))
        await until(pilot, lambda: "⧗ 'c' out on ranks 0-1" in str(app.query_one(RankBar).render()))
        await pilot.press("f12")
        await until(pilot, lambda: all_paused(app))
        assert {str(r.state.location) for r in app.session.ranks} <= {
            f"tests/scripts/spins.py:{line}" for line in (11, 12, 13)
        }
        said = "interrupted ranks 0-1: each stops at the line it runs"
        await until(pilot, lambda: any(said in line for line in app.command_log.lines_text()))
        app.session.kill_now()


class LogApp(App[None]):
    """The command log alone, 60 columns wide."""

    def compose(self) -> ComposeResult:
        """One log."""
        yield CommandLog()


async def test_a_long_note_wraps_and_a_table_row_is_cut() -> None:
    """A note wider than the log ends on the next line (the crash behind a hang was cut off at the
    terminal's edge); a table's rows stay one line each, cut with an ellipsis."""
    app = LogApp()
    note = (
        "hang: rank 1 is missing from collective #8 all_reduce [10] float32 (rec.py:23); "
        "rank 1 completed #7 and crashed RuntimeError: mat1 and mat2 shapes cannot be multiplied"
    )
    row = "  ranks 0,2-5 │ tensor([0.1000, 0.2000, 0.3000, 0.4000, 0.5000, 0.6000, 0.7000, 0.8000])"
    async with app.run_test(size=(60, 10)) as pilot:
        log = app.query_one(CommandLog)
        log.show(Result((note,)))
        log.show(Result((row,), tables=((":compare x", compare({0: "KeyError: 'x'"})),)))
        await pilot.pause()
        shown = [strip.text.rstrip() for strip in log.lines]
        assert len(shown) == 4 and all(len(line) <= 58 for line in shown), shown
        assert " ".join(shown[:3]).split() == note.split()  # every word of the note is on screen
        assert shown[3].startswith("  ranks 0,2-5 │ tensor([0.1000") and shown[3].endswith("…")
        assert log.lines_text() == [note, row]  # as said, unwrapped
