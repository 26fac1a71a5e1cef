"""All-stop in the app: the command log says it once, the rank bar shows every rank stopped;
with all-stop off (`--non-stop`) the others run on to their end. Four real gloo ranks."""

from __future__ import annotations

import psutil
from conftest import SCRIPTS, until

from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.rank_bar import RankBar

LOOP = "tests/scripts/allstop_loop.py"


def app_on_loop(all_stop: bool) -> DdptuiApp:
    """The app on allstop_loop.py's four ranks."""
    spec = LaunchSpec(target=str(SCRIPTS / "allstop_loop.py"), nproc=4, stall_timeout=30, all_stop=all_stop)
    return DdptuiApp(Session(spec))


def gone(app: DdptuiApp) -> bool:
    """True when no rank process of the app is alive."""
    pids = [rank.transport.pid for rank in app.session.ranks]  # type: ignore[attr-defined]
    return not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


async def test_the_command_log_says_the_all_stop_and_the_bar_shows_every_rank_paused() -> None:
    application = app_on_loop(all_stop=True)
    async with application.run_test(size=(160, 40)) as pilot:
        log = application.command_log
        said = f"all-stop: rank 2 stopped at {LOOP}:16 (breakpoint); ranks 0-1,3 stopped at their next line"
        await until(pilot, lambda: said in log.lines_text(), timeout=60)
        assert all(rank.state.at_prompt for rank in application.session.ranks)
        await until(pilot, lambda: f"paused at {LOOP}:16" in str(application.query_one(RankBar).render()))
        assert [line for line in log.lines_text() if "all-stop" in line] == [said]
        application.session.kill_now()
    assert gone(application)


async def test_non_stop_lets_the_others_run_to_their_end() -> None:
    application = app_on_loop(all_stop=False)
    async with application.run_test(size=(160, 40)) as pilot:
        ranks = application.session.ranks
        await until(
            pilot,
            lambda: len(ranks) == 4 and all(ranks[i].state.exit_code == 0 for i in (0, 1, 3)),
            timeout=60,
        )
        assert ranks[2].state.phase is Phase.PAUSED and str(ranks[2].state.location) == f"{LOOP}:16"
        assert not [line for line in application.command_log.lines_text() if "all-stop" in line]
        application.session.kill_now()
    assert gone(application)
