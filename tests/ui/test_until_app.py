"""F7 in the app on an FSDP2 job: every rank stops before FSDP2's first all-gather, and says who issued it."""

from __future__ import annotations

import psutil
from conftest import SCRIPTS, until
from test_app import all_paused, screen_text

from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp


async def test_f7_stops_an_fsdp2_job_before_its_first_all_gather() -> None:
    app = DdptuiApp(Session(LaunchSpec(target=str(SCRIPTS / "until_fsdp2.py"), nproc=2)))
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: all_paused(app), 90)
        await pilot.press("f7")
        said = "all 2 ranks about to enter #1 all_gather_single [72] float32"
        await until(pilot, lambda: said in "\n".join(app.command_log.lines_text()), 60)
        assert "all_gather_single in FSDP2 all-gather for 0 (forward)" in "\n".join(
            app.command_log.lines_text()
        )
        banner = "--Collective: all_gather_single [72] float32 in FSDP2 all-gather for 0 (forward)--"
        stopped = (banner, "-> loss = model(x).sum()", "(Pdb r")
        await until(pilot, lambda: all(all(t in screen_text(app, r) for t in stopped) for r in (0, 1)))
        pids = [r.transport.pid for r in app.session.ranks]
    assert not [
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
