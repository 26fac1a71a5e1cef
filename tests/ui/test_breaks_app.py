"""The app on ranks stopped by `--break`: paused at that line like a `breakpoint()` stop, in their
state, their panes and the lockstep; `:breaks` and `:compare` answer there."""

from __future__ import annotations

from dataclasses import replace

import psutil
from conftest import SCRIPTS, until
from test_app import all_paused, screen_text, spec

from ddptui.core.session.session import Session
from ddptui.ui.app import DdptuiApp

STEPS = SCRIPTS / "steps.py"


async def test_a_break_pauses_every_rank_at_its_line_and_they_step_in_lockstep() -> None:
    app = DdptuiApp(Session(replace(spec(STEPS), breaks=(f"{STEPS}:6",))))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        for rank in app.session.ranks:
            assert rank.state.describe() == "paused at tests/scripts/steps.py:6"
            assert "-> value = rank * 10" in screen_text(app, rank.index)
        log = app.command_log.lines_text
        await pilot.press("f2", *":breaks", "enter")
        await until(pilot, lambda: "[ranks 0-1] 1 tests/scripts/steps.py:6 (hits 1)" in log())
        await pilot.press("f10")  # one lockstep step from the break, to the script's breakpoint() line
        await until(pilot, lambda: all("-> breakpoint()" in screen_text(app, r) for r in (0, 1)))
        await until(pilot, lambda: all_paused(app))
        await pilot.press(*":compare value", "enter")
        await until(pilot, lambda: "2 distinct values" in log())
        assert [line.split()[-1] for line in log()[-3:-1]] == ["0", "10"]
    pids = [rank.transport.pid for rank in app.session.ranks]  # type: ignore[attr-defined]
    assert not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
