"""The guide's NaN recipe in the app, on a script left as it is: `--break` and `:until` name rank 2
at step 3, and every rank's pane shows it paused there."""

from __future__ import annotations

from dataclasses import replace

import psutil
from conftest import SCRIPTS, until
from test_app import all_paused, screen_text, spec

from ddptui.core.commands import registry as commands
from ddptui.core.session.session import Session
from ddptui.ui.app import DdptuiApp

NAN = SCRIPTS / "nan_rank2.py"


async def test_break_and_until_find_the_nan_rank_in_the_app() -> None:
    lines = NAN.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.rstrip().endswith("# the loss line")) + 1
    app = DdptuiApp(Session(replace(spec(NAN, nproc=4), breaks=(f"{NAN}:{line}",))))
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: all_paused(app), 90)
        await pilot.press("f2", *":until bool(loss.isnan())", "enter")
        found = f"bool(loss.isnan()) first true on rank 2 at tests/scripts/nan_rank2.py:{line} (stop 3)"
        await until(pilot, lambda: any(found in text for text in app.command_log.lines_text()), 90)
        await until(pilot, lambda: all_paused(app))
        steps = await commands.evaluate(app.session, "step")
        assert {answer["repr"] for answer in steps.values()} == {"3"}, steps  # type: ignore[index]
        assert all("-> loss.backward()" in screen_text(app, rank) for rank in range(4))
        pids = [rank.transport.pid for rank in app.session.ranks]  # type: ignore[attr-defined]
        app.session.kill_now()
    assert not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
