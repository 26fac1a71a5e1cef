"""Every `:` command through batch mode and through the app: both front ends say the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SCRIPTS, Runner, until
from test_app import all_paused, spec

from ddptui.core.commands.registry import commands
from ddptui.core.session.session import Session
from ddptui.ui.app import DdptuiApp
from ddptui.ui.quit_screen import QuitScreen

LINES = [
    ":help",
    ":ranks",
    ":ranks 1",
    ":ranks all",
    ":r 0-1",
    ":state",
    ":status",
    ":mesh",
    ":breaks",
    ":skip",
    ":skip steps.py:9",
    ":skip none",
    ":compare value",
    ":compare --tol 0.5 value * 1e-9",
    ":cmp",
    ":until value > 5",  # true on rank 1 where the ranks stand: nothing continues
    ":until-diverge value",
    ":until --max-stops 0 value",
    ":until-diverge --tol x value",
    ":watch value + 1",
    ":watch",
    ":unwatch value + 1",
    ":unwatch all",
    ":where",
    ":group pair 0,1",
    ":group",
    ":ddp-check",
    ":collectives",
    ":stacks",
    ":interrupt",
    ":detach",
    ":nosuch",
    ":ranks 7",
    "@9 p 1",
]
"""Command lines run in both front ends, in this order (all but the `@9` error are `:` commands)."""


def normalise(lines: list[str]) -> list[str]:
    """Pids differ between two runs of the same job."""
    return [re.sub(r"pid \d+", "pid N", line) for line in lines]


def batch_blocks(stdout: str) -> dict[str, list[str]]:
    """The `ddptui:` lines batch mode printed after each command line."""
    blocks: dict[str, list[str]] = {}
    current = "@9 p 1"  # a line that fails to parse is not echoed: its error follows `:ranks 7`'s
    for line in stdout.splitlines():
        if line.startswith("(ddptui) "):
            current = line[len("(ddptui) ") :]
            blocks[current] = []
        elif line.startswith("ddptui: ") and current in blocks:
            blocks[current].append(line[len("ddptui: ") :])
    return blocks


def test_the_table_covers_every_command() -> None:
    named = {line.split()[0][1:] for line in LINES if line.startswith(":")}
    # quit: its own test below; until-collective runs the ranks (see test_collective_verdicts.py)
    assert {command.name for command in commands()} - named == {"quit", "until-collective"}


async def test_batch_and_app_agree_on_every_command(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "\n".join([*LINES, "c"]) + "\n")
    blocks = batch_blocks(result.stdout)
    blocks[":ranks 7"], at_error = blocks[":ranks 7"][:1], blocks[":ranks 7"][1:]
    blocks["@9 p 1"] = at_error
    app = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2")
        for line in LINES:
            before = len(app.command_log.lines_text())
            await pilot.press(*line, "enter")
            await until(pilot, lambda n=before: len(app.command_log.lines_text()) > n)
            await pilot.pause(0.1)
            shown = app.command_log.lines_text()[before:]
            if shown and shown[0].startswith("(ddptui) "):
                assert shown[0] == f"(ddptui) {line}"
                shown = shown[1:]
            expected = blocks[line]
            assert expected, f"batch said nothing for {line}"
            if line.split()[0] in (":help",):
                shown = shown[: len(expected)]  # the app adds its keys after the help
            assert normalise(shown) == normalise(expected), line
        app.session.kill_now()


@pytest.mark.parametrize("word", ["q", "exit", ":quit", ":q"])
def test_quit_words_end_batch_mode(ddptui: Runner, word: str) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", f"{word}\np value\n")
    assert "(ddptui) p value" not in result.stdout
    assert "rank 0: paused at tests/scripts/steps.py:8 (ended by ddptui)" in result.stdout


@pytest.mark.parametrize("word", ["q", "exit", ":quit", ":q"])
async def test_quit_words_ask_to_quit_in_the_app(word: str, tmp_path: Path) -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "steps.py")))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2", *word, "enter")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, timeout=10)
