"""The app driven by Pilot against real ranks under real ptys."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from conftest import SCRIPTS, steady_identities, until
from textual import events
from textual.pilot import Pilot
from textual.widgets._footer import FooterKey

from ddptui.core.model.state import Phase
from ddptui.core.model.targets import format_ranks
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.rank_bar import RankBar
from ddptui.ui.rank_pane import RankPane

SNAPSHOT_DIR = Path("/tmp/ddptui-snapshot")


def screen_text(app: DdptuiApp, rank: int) -> str:
    """What a rank's pane shows."""
    return app.query_one(f"#rank-{rank}", RankPane).terminal.text()


def all_paused(app: DdptuiApp) -> bool:
    """Every rank at its prompt, drawn in its pane if the pane is shown."""
    ranks = app.session.ranks
    return bool(ranks) and all(
        r.state.phase is Phase.PAUSED
        and r.prompt_shown()
        and (not app.pane(r.index).display or last_line(app, r.index).startswith(f"(Pdb r{r.index})"))
        for r in ranks
    )


def last_line(app: DdptuiApp, rank: int) -> str:
    """The last non-empty line of a pane."""
    lines = [line for line in screen_text(app, rank).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def spec(script: Path, nproc: int = 2) -> LaunchSpec:
    """A plain-Python job."""
    return LaunchSpec(target=str(script), nproc=nproc, stall_timeout=5)


@pytest.fixture
def app() -> DdptuiApp:
    """The app on a 2-rank plain-Python job; its processes are checked gone afterwards."""
    application = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    yield application
    pids = [r.transport.pid for r in application.session.ranks]
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive


async def test_panes_show_prompts_and_f10_steps_every_rank(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        for rank in (0, 1):
            assert "-> value += 1" in screen_text(app, rank)
        await pilot.press("f10")
        await until(pilot, lambda: all("-> value += 2" in screen_text(app, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(app))


async def test_typing_in_a_pane_goes_to_that_rank_only(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f4")  # focus rank 1
        await until(pilot, lambda: isinstance(app.focused, RankPane) and app.focused.rank == 1)
        await pilot.press(*"p rank * 7", "enter")
        await until(pilot, lambda: "7" in screen_text(app, 1).splitlines())
        assert "p rank * 7" not in screen_text(app, 0)


async def test_f10_after_keys_typed_in_a_pane_steps_that_rank_too(app: DdptuiApp) -> None:
    """Keys left in a pane without Enter do not swallow the broadcast (`p outn` ran on that rank):
    the line is emptied, the rank steps with the rest, and the command log says what was cleared."""
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f4")  # focus rank 1
        await until(pilot, lambda: isinstance(app.focused, RankPane) and app.focused.rank == 1)
        await pilot.press(*"p out")
        await until(pilot, lambda: last_line(app, 1).endswith("p out"))
        await pilot.press("f10")
        await until(pilot, lambda: all("-> value += 2" in screen_text(app, r) for r in (0, 1)))
        await until(pilot, lambda: "rank 1: cleared 'p out'" in "\n".join(app.command_log.lines_text()))
        assert "NameError" not in screen_text(app, 1) and "SyntaxError" not in screen_text(app, 1)


async def test_f7_stops_a_ddp_job_at_loss_backward_and_says_so() -> None:
    """DDP all-reduces the gradients from C++ inside backward(): F7 stops every rank there."""
    app = DdptuiApp(Session(LaunchSpec(target=str(SCRIPTS / "until_ddp.py"), args=("train",), nproc=2)))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app), 90)
        await pilot.press("f7")
        await until(
            pilot, lambda: "all 2 ranks about to enter" in "\n".join(app.command_log.lines_text()), 60
        )
        log = "\n".join(app.command_log.lines_text())
        assert "all_reduce in DDP backward  [10]" in log, log
        banner = "--Collective: all_reduce [10] float32 in DDP backward--"
        stopped = (banner, "-> loss.backward()", "(Pdb r")  # the pane drew up to the prompt
        await until(pilot, lambda: all(all(t in screen_text(app, r) for t in stopped) for r in (0, 1)))
        pids = [r.transport.pid for r in app.session.ranks]
    assert not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


async def test_broadcast_answers_in_every_pane(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2")
        await pilot.pause()
        bar = app.query_one(CommandBar)
        assert bar.broadcast and app.focused is bar.input
        await pilot.press(*"p rank + 100", "enter")
        await until(pilot, lambda: all(f"{100 + r}" in screen_text(app, r).splitlines() for r in (0, 1)))


async def test_rank_bar_follows_paused_running_exited(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        bar = app.query_one(RankBar)
        await until(pilot, lambda: all_paused(app))
        await until(pilot, lambda: "paused at" in str(bar.render()))  # the bar redraws once a frame
        assert "steps.py:8" in str(bar.render())
        await pilot.press("f5")
        await until(pilot, lambda: " r0-1  exited 0 " in str(bar.render()))
        assert app.query_one("#rank-0", RankPane).has_class("-exited")


async def test_quit_confirms_and_ends_every_rank(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        pids = [r.transport.pid for r in app.session.ranks]
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "QuitScreen"
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, timeout=10)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def test_main_screen_snapshot(snap_compare: Callable[..., bool]) -> None:
    SNAPSHOT_DIR.mkdir(exist_ok=True)
    shutil.copy(SCRIPTS / "steps.py", SNAPSHOT_DIR / "steps.py")
    application = DdptuiApp(Session(spec(SNAPSHOT_DIR / "steps.py")))

    async def settle(pilot: Pilot[int]) -> None:
        await until(pilot, lambda: all_paused(application))
        await pilot.press("f10")
        await until(pilot, lambda: all("-> value += 2" in screen_text(application, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(application))
        panes = list(application.query(RankPane))
        await until(pilot, lambda: all(p.terminal.pending == 0 for p in panes))
        await steady_identities(pilot, application)
        await pilot.pause(0.2)

    assert snap_compare(application, terminal_size=(120, 30), run_before=settle)


async def test_readline_history_completion_and_editing_work_in_a_pane(app: DdptuiApp) -> None:
    """A broadcast is read as a plain line; keys typed in a pane get readline, whose history
    holds the broadcast too."""
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press(*"p 6*8", "backspace", "7", "enter")  # readline editing: 6*8 -> 6*7
        await until(pilot, lambda: screen_text(app, 0).splitlines().count("42") == 1)
        await pilot.press("up", "enter")  # readline history
        await until(pilot, lambda: screen_text(app, 0).splitlines().count("42") == 2)
        assert "42" not in screen_text(app, 1)
        await pilot.press(*"p valu", "tab", "enter")  # completion of the frame's names
        await until(pilot, lambda: "(Pdb r0) p value\n0\n(Pdb r0)" in screen_text(app, 0))
        await pilot.press("f2", *"p 100 + rank", "enter", "f2")
        await until(pilot, lambda: "\n101\n(Pdb r1)" in screen_text(app, 1) and app.pane(0).has_focus)
        await pilot.press("up", "enter")  # the broadcast, from rank 0's history
        await until(pilot, lambda: screen_text(app, 0).count("\n100\n") == 2)


async def test_divergence_crash_and_terminal_size_are_shown() -> None:
    application = DdptuiApp(Session(spec(SCRIPTS / "diverge.py", nproc=3)))
    async with application.run_test(size=(150, 40)) as pilot:
        bar = application.query_one(RankBar)
        await until(pilot, lambda: all_paused(application))
        where = "tests/scripts/diverge.py"
        for rank in application.session.ranks:  # who each rank is, under its pane
            who = rank.identity
            assert who is not None and who.host == socket.gethostname() and who.local_rank == rank.index
            pane = application.pane(rank.index)
            assert pane.identity == f"local rank {rank.index} · {who.host} · pid {who.pid}"
            assert str(pane.border_subtitle) == pane.identity
        verdict = f"ranks diverge: 0 at {where}:10 · 1-2 at {where}:13"
        await until(pilot, lambda: verdict in str(bar.render()))  # the bar redraws once a frame
        assert bar.has_class("-diverged")
        await pilot.press("f5")  # held back by the divergence guard
        await until(
            pilot, lambda: any("!c sends anyway" in line for line in application.command_log.lines_text())
        )
        assert all(r.state.at_prompt for r in application.session.ranks)
        await pilot.press("f2", *"!c", "enter")
        await until(pilot, lambda: "crashed ValueError" in str(bar.render()))
        pane = application.query_one("#rank-2", RankPane)
        assert pane.has_class("-crashed")
        # the bar can show the crash a frame before the pane has drawn the traceback
        await until(pilot, lambda: "ValueError: rank 2 is unhappy" in screen_text(application, 2))
        await until(pilot, lambda: "exited 0" in str(bar.render()))
        terminal = application.query_one("#rank-0", RankPane).terminal
        size = f"os.terminal_size(columns={terminal.columns}, lines={terminal.lines})"
        await until(pilot, lambda: size in screen_text(application, 0))


async def test_more_ranks_than_fit_are_paged() -> None:
    application = DdptuiApp(Session(spec(SCRIPTS / "steps.py", nproc=10)))
    async with application.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: all_paused(application))
        shown = [pane.rank for pane in application.query(RankPane) if pane.display]
        assert shown == list(range(8))
        for _ in range(8):
            await pilot.press("f4")
        await until(pilot, lambda: application.focused is application.query_one("#rank-8", RankPane))
        await until(
            pilot, lambda: [pane.rank for pane in application.query(RankPane) if pane.display] == [8, 9]
        )
        await until(pilot, lambda: "(Pdb r8)" in screen_text(application, 8))
        application.session.kill_now()


async def test_subset_prefix_and_default_targets_on_the_command_line(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2", *"@1 p rank + 500", "enter")
        await until(pilot, lambda: "501" in screen_text(app, 1).splitlines())
        await pilot.press(*":ranks 0", "enter")
        await until(
            pilot, lambda: str(app.command_bar.query_one("#mode").render()).strip() == "BROADCAST → rank 0"
        )
        await pilot.press(*"p rank + 700", "enter")
        await until(pilot, lambda: "700" in screen_text(app, 0).splitlines())
        await until(pilot, lambda: all_paused(app))
        assert "500" not in screen_text(app, 0) and "70" not in screen_text(app, 1)


async def test_hostile_bytes_in_panes() -> None:
    application = DdptuiApp(Session(spec(SCRIPTS / "hostile.py")))
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application))
        await pilot.press("f2", *"p marker", "enter")
        await until(pilot, lambda: all("'still alive'" in screen_text(application, r) for r in (0, 1)))
        application.session.kill_now()


async def test_gloo_error_text_is_shown_as_text_and_the_app_stays_up() -> None:
    application = DdptuiApp(Session(spec(SCRIPTS / "peer_dies.py")))
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application), timeout=60)
        await pilot.press("f5")
        await until(pilot, lambda: application.session.ranks[0].state.crash is not None, timeout=60)
        crash = application.session.ranks[0].state.crash
        assert crash is not None and crash.message.startswith("[")  # gloo's `[/path/pair.cc:NNN] ...`
        await until(pilot, lambda: "crashed RuntimeError" in (application.pane(0).border_title or ""))
        await pilot.press("f5")  # not at a prompt: says so with the error text in it
        await pilot.press("f2", *":state", "enter")
        await until(
            pilot, lambda: any("rank 0: crashed" in line for line in application.command_log.lines_text())
        )
        await pilot.pause(0.3)
        assert application.is_running
        log = "\n".join(application.command_log.lines_text())
        assert f"rank 0: crashed RuntimeError: {crash.message.splitlines()[0][:100]}" in log
        assert "[bold]bold[/bold] [@click=app.quit]" in screen_text(application, 1)
        application.session.kill_now()
    assert application.return_code != 70


async def test_ranks_that_crash_together_are_said_in_one_line() -> None:
    """The first crash gets the keys; the others were a line each in the command log (255 of
    them when 256 ranks hit one bug). And no rank is marked the root cause of the others."""
    application = DdptuiApp(Session(spec(SCRIPTS / "all_crash.py", 6)), grid_threshold=4)
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application), timeout=60)
        await pilot.press("f5")
        ranks = application.session.ranks
        said = lambda: [line for line in application.command_log.lines_text() if "F6 goes to" in line]  # noqa: E731
        await until(pilot, lambda: all(r.state.crash is not None for r in ranks) and bool(said()))
        await pilot.pause(0.3)  # a straggler would be a second line
        focused = application.typing_focus.rank
        assert said() == [
            f"ranks {format_ranks(set(range(6)) - {focused})} crashed NameError: name 'undefined_name' "
            "is not defined (tests/scripts/all_crash.py:7), in post-mortem · F6 goes to their panes"
        ]
        grid = application.state_grid
        assert grid is not None and grid.marks == {}  # the same bug on every rank: none is the root cause
        application.session.kill_now()


async def test_a_broadcast_is_echoed_before_what_it_sets_off() -> None:
    """`c` crashes ranks 1 and 2 at once while rank 0 runs on: the log says `(ddptui) c`, then the
    crash the keys did not go to, then rank 0's answer (the echo waited for every rank to be back,
    and came after the crash it caused)."""
    application = DdptuiApp(Session(spec(SCRIPTS / "crash_while_peer_runs.py", 3)))
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application), timeout=60)
        await pilot.press("f5")
        log = application.command_log.lines_text
        await until(pilot, lambda: any(line.startswith("[rank 0] > ") for line in log()), timeout=30)
        crash = next(i for i, line in enumerate(log()) if " crashed NameError" in line)
        answer = next(i for i, line in enumerate(log()) if line.startswith("[rank 0] > "))
        assert log().index("(ddptui) c") < crash < answer, log()
        application.session.kill_now()


async def test_the_log_echoes_a_line_as_typed_whether_sent_or_held_back(app: DdptuiApp) -> None:
    """`@1 p ...` is echoed with its targets, and `restart` (never sent) is echoed before the
    reason it was not sent, as --batch echoes them."""
    log = app.command_log.lines_text
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2", *"@1 p rank + 500", "enter")
        await until(pilot, lambda: "[rank 1] 501" in log())
        assert log()[-2:] == ["(ddptui) @1 p rank + 500", "[rank 1] 501"]
        await until(pilot, lambda: all_paused(app))
        await pilot.press(*"restart", "enter")
        await until(pilot, lambda: log()[-1].startswith("not sent: pdb restarts only a program"))
        assert log()[-2] == "(ddptui) restart"
        app.session.kill_now()


async def test_cl_broadcast_clears_every_rank_and_cl_typed_in_a_pane_asks() -> None:
    """pdb's `cl` asks `Clear all breaks?`, which no broadcast answers: sent to every rank it
    clears them all at once; typed into one rank's pane, that rank asks, as pdb does."""
    application = DdptuiApp(Session(spec(SCRIPTS / "stepping.py")))
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application), timeout=60)
        await pilot.press("f2", *"b leaf", "enter")
        await until(pilot, lambda: all("Breakpoint 1 at" in screen_text(application, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(application))
        await pilot.press(*"cl", "enter")
        deleted = "Deleted breakpoint 1 at "
        await until(pilot, lambda: all(deleted in screen_text(application, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(application))
        assert not any("Clear all breaks?" in screen_text(application, r) for r in (0, 1))
        await pilot.press(*"b leaf", "enter", "f2")  # breakpoint 2 on both; then keys go to the panes
        await until(pilot, lambda: all("Breakpoint 2 at" in screen_text(application, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(application))
        await pilot.press("f4")  # rank 1's pane
        await until(
            pilot, lambda: isinstance(application.focused, RankPane) and application.focused.rank == 1
        )
        await pilot.press(*"cl", "enter")
        await until(pilot, lambda: last_line(application, 1) == "Clear all breaks?")
        await pilot.press("y", "enter")
        await until(pilot, lambda: "Deleted breakpoint 2 at " in screen_text(application, 1))
        assert "Deleted breakpoint 2 at " not in screen_text(application, 0)


async def test_terminal_queries_are_not_typed_into_pdb() -> None:
    application = DdptuiApp(Session(spec(SCRIPTS / "queries.py")))
    async with application.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(application))
        await pilot.pause(0.3)  # time for any answer to reach the ranks' input
        await pilot.press("f10")
        await until(
            pilot, lambda: all('-> print("stepped", step)' in screen_text(application, r) for r in (0, 1))
        )
        assert not any("SyntaxError" in screen_text(application, r) for r in (0, 1))
        application.session.kill_now()


async def test_a_collective_verdict_is_shown_in_the_command_log() -> None:
    application = DdptuiApp(
        Session(
            LaunchSpec(
                target=str(SCRIPTS / "collective_bugs.py"), args=("deadlock",), nproc=2, stall_timeout=2
            )
        )
    )
    async with application.run_test(size=(160, 40)) as pilot:
        lines = application.command_log.lines_text
        await until(pilot, lambda: any(line.startswith("deadlock: ") for line in lines()), timeout=60)
        (verdict,) = [line for line in lines() if line.startswith("deadlock: ")]
        assert verdict == (
            "deadlock: rank 0 waits in #2 all_reduce (tests/scripts/collective_bugs.py:28); "
            "rank 1 waits in #2 barrier (tests/scripts/collective_bugs.py:30)"
        )
        application.session.kill_now()


async def test_broadcast_answers_are_collapsed_in_the_command_log(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        log = app.command_log.lines_text
        await pilot.press("f2", *"p 6 * 7", "enter")
        await until(pilot, lambda: "[ranks 0-1] 42" in log())
        await pilot.press(*"p value", "enter")
        await until(pilot, lambda: "[rank 1] 10" in log())
        assert "[rank 0] 0" in log() and log().index("(ddptui) p value") < log().index("[rank 0] 0")


async def test_colon_at_a_pane_prompt_starts_a_ddptui_command_and_typing_comes_back(app: DdptuiApp) -> None:
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f4")  # type into rank 1
        await until(pilot, lambda: isinstance(app.focused, RankPane) and app.focused.rank == 1)
        bar = app.query_one(CommandBar)
        await pilot.press(":")
        await until(pilot, lambda: app.focused is bar.input and bar.input.value == ":")
        await pilot.press(*"state", "enter")
        await until(pilot, lambda: "(ddptui) :state" in app.command_log.lines_text())
        await until(pilot, lambda: isinstance(app.focused, RankPane) and app.focused.rank == 1)
        assert not bar.broadcast
        assert ":" not in screen_text(app, 1)  # pdb never saw it (it would answer *** SyntaxError)
        # Past the prompt's first key, `:` is the rank's: pdb gets `p {1: 2}` whole.
        await pilot.press(*"p {1: 2}", "enter")
        await until(pilot, lambda: "{1: 2}" in screen_text(app, 1).splitlines())
        assert app.focused is app.pane(1)
        # Typed fast (as tmux send-keys or a quick typist does), the keys after `:` are already
        # queued at the pane when the command line takes over: they still make the command.
        log_lines = len(app.command_log.lines_text())
        pane = app.pane(1)
        for key in ":stacks\r":
            pane.post_message(RankPane.Input(1, key.encode(), pane))
        await until(pilot, lambda: "(ddptui) :stacks" in app.command_log.lines_text()[log_lines:])
        await until(pilot, lambda: app.focused is pane)
        assert "stacks" not in screen_text(app, 1)


async def test_moving_between_panes_keeps_the_footer_as_it_is(app: DdptuiApp) -> None:
    """Textual composes its footer again on every focus change; the keys are the same here."""
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        keys = list(app.query(FooterKey))
        assert "f10" in [key.key for key in keys]
        for press in ("f4", "f4", "f3", "f2", "f2"):
            await pilot.press(press)
            await pilot.pause(0.05)
        assert list(app.query(FooterKey)) == keys  # the same widgets: not composed again


async def test_a_focus_event_arriving_after_the_screens_are_gone_is_harmless(app: DdptuiApp) -> None:
    """Under load a focus change can still be queued as the app exits, its screens already gone."""
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        pane = app.query(RankPane).last()
    assert not app.screen_stack
    app.on_descendant_focus(events.DescendantFocus(pane))  # once raised ScreenStackError
    assert app.typing_focus.rank == pane.rank


async def test_notes_said_before_the_app_started_are_in_its_command_log() -> None:
    session = Session(spec(SCRIPTS / "steps.py"))
    session.notices.append("--max-restarts 3: ddptui does not restart ranks")
    application = DdptuiApp(session)
    async with application.run_test(size=(160, 40)) as pilot:
        lines = application.command_log.lines_text
        await until(pilot, lambda: all_paused(application))
        assert "--max-restarts 3: ddptui does not restart ranks" in lines()
        application.session.kill_now()
