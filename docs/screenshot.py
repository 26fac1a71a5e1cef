"""Make docs/screenshot.svg: the demo's 4 ranks after two lockstep steps and a broadcast `p loss`.

Run with `make screenshot` (it takes a few seconds: four real torch ranks start).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ddptui.cli.options import DEMO_SCRIPT
from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.rank_pane import RankPane

OUT = Path(__file__).resolve().parent / "screenshot.svg"


def all_paused(app: DdptuiApp) -> bool:
    """Every rank paused, with its prompt drawn."""
    panes = list(app.query(RankPane))
    ranks = app.session.ranks
    return (
        bool(ranks)
        and all(r.state.phase is Phase.PAUSED and r.prompt_shown() for r in ranks)
        and all(p.terminal.pending == 0 for p in panes)
    )


async def wait(app: DdptuiApp, timeout: float = 60) -> None:
    """Wait until all ranks are back at their prompts."""
    deadline = time.monotonic() + timeout
    await asyncio.sleep(0.3)
    while not all_paused(app):
        if time.monotonic() > deadline:
            raise SystemExit("the demo did not reach its prompts")
        await asyncio.sleep(0.1)


async def main() -> None:
    """Drive the demo and save the screen."""
    app = DdptuiApp(Session(LaunchSpec(target=DEMO_SCRIPT, nproc=4, stall_timeout=30)))
    async with app.run_test(size=(160, 44)) as pilot:
        await wait(app)
        for _ in range(2):
            await pilot.press("f10")
            await wait(app)
        await pilot.press("f2", *"p loss", "enter")
        await wait(app)
        await pilot.pause(0.3)
        app.save_screenshot(str(OUT))
        app.session.kill_now()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
