"""`:until` in the app: its progress on the command bar, its result in the command log, and Escape or
F12 stopping it with every rank back at its prompt."""

from __future__ import annotations

import psutil
from conftest import SCRIPTS, until
from test_app import all_paused, spec
from textual.widgets import Label

from ddptui.core.commands import registry as commands
from ddptui.core.session.session import Session
from ddptui.ui.app import DdptuiApp

AT = "tests/scripts/slow_loop.py:13"
"""Where slow_loop.py's breakpoint() stops."""


def progress(app: DdptuiApp) -> str:
    """What the command bar's progress label shows ("" when it is hidden)."""
    label = app.command_bar.query_one("#progress", Label)
    return str(label.render()) if label.display else ""


def stops_shown(app: DdptuiApp) -> int:
    """The stop the progress label says the running `:until` is at (0 before its first)."""
    shown = progress(app)
    return int(shown.rpartition(" stop ")[2].rstrip("…")) if " stop " in shown else 0


def said(app: DdptuiApp, since: int = 0) -> str:
    """The command log's text (from its line `since` on)."""
    return "\n".join(app.command_log.lines_text()[since:])


async def test_until_shows_its_progress_and_escape_or_f12_stops_it() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "slow_loop.py")))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app))
        assert app.check_action("stop_until", ()) is False  # Escape is the pane's while none runs
        for key in ("escape", "f12"):
            before = len(app.command_log.lines_text())
            await pilot.press("f2", *":until bool(step > 10**6)", "enter")
            await until(pilot, lambda: stops_shown(app) >= 3, 60)
            assert progress(app).startswith(":until bool(step > 10**6) … stop ")
            await pilot.press(key)
            await until(pilot, lambda n=before: "stopped by the user" in said(app, n), 60)
            assert "stopping :until bool(step > 10**6) … stop " in said(app, before)
            line = said(app, before).splitlines()[-1]
            assert line.startswith(":until bool(step > 10**6) stopped by the user after "), line
            assert line.endswith(f"; ranks 0-1 paused at {AT}"), line
            await until(pilot, lambda: progress(app) == "")
            assert all_paused(app)
            assert {str(rank.state.location) for rank in app.session.ranks} == {AT}
            steps = await commands.evaluate(app.session, "step")
            assert len({answer["repr"] for answer in steps.values()}) == 1, steps  # type: ignore[index]
            assert "interrupted" not in said(app, before)  # F12 stopped the :until, not the ranks
        await pilot.press(*":until step >= 0", "enter")
        await until(pilot, lambda: f"step >= 0 first true on ranks 0-1 at {AT} (stop 0" in said(app), 30)
        pids = [rank.transport.pid for rank in app.session.ranks]
        app.session.kill_now()
    assert not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
