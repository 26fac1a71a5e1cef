"""One table of keys: the app's bindings, the command palette and the help line all agree with it;
the palette lists every `:` command of the registry too."""

from __future__ import annotations

from conftest import SCRIPTS, until
from textual.command import CommandList, CommandPalette
from textual.content import Content
from textual.pilot import Pilot

from ddptui.core.commands import registry
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.actions import ACTIONS, help_line
from ddptui.ui.app import DdptuiApp
from ddptui.ui.rank_pane import RankPane


def app_on_two_ranks() -> DdptuiApp:
    """The real app on a 2-rank plain-Python job."""
    return DdptuiApp(Session(LaunchSpec(target=str(SCRIPTS / "steps.py"), nproc=2, stall_timeout=5)))


def test_the_table_names_each_key_and_action_once() -> None:
    assert len({action.key for action in ACTIONS}) == len(ACTIONS)
    assert len({action.action for action in ACTIONS}) == len(ACTIONS)
    assert [action.key_label for action in ACTIONS[:4]] == ["F2", "F10", "F11", "Shift+F11"]
    assert ACTIONS[-1].key_label == "Ctrl+Q"


async def test_bindings_palette_and_help_line_agree_with_the_table() -> None:
    app = app_on_two_ranks()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: bool(app.query(RankPane)))
        active = app.screen.active_bindings
        for action in ACTIONS:
            if action.passing:  # bound only while an :until runs (test_hunting_app): now the pane's
                assert action.key not in active, action.key
                continue
            node, binding = active[action.key].node, active[action.key].binding
            assert node is app, action.key
            assert (binding.action, binding.description, binding.show, binding.priority) == (
                action.action,
                action.description,
                action.show,
                True,
            )
        ours = {key for key, bound in active.items() if bound.node is app and not bound.binding.system}
        assert ours - {app.COMMAND_PALETTE_BINDING} == {
            action.key for action in ACTIONS if not action.passing
        }

        # the palette shows an entry's help as markup: what it renders is the help, every bracket kept
        commands = {
            command.title: Content.from_markup(command.help).plain
            for command in app.get_system_commands(app.screen)
        }
        for action in ACTIONS:
            assert commands[action.palette_title] == action.help
        for entry in registry.commands():
            assert commands[f":{entry.name}"] == f"{entry.usage} · {entry.help}", entry.name
        assert commands[":until"].startswith(":until [--max-stops N] EXPR · ")
        for key in ("F6", "F7", "F9"):
            assert any(title.endswith(f" · {key}") for title in commands), key
        assert "Quit" not in commands  # Textual's own, the same action as ours, which has its key

        await pilot.press("f2", *":help", "enter")
        lines = app.command_log.lines_text
        await until(pilot, lambda: any(line.startswith("keys: ") for line in lines()))
        said = next(line for line in lines() if line.startswith("keys: "))
        assert said == f"keys: {help_line()}"
        for action in ACTIONS:
            assert f"{action.key_label} {action.help_label}" in said
        app.session.kill_now()


async def test_a_palette_entry_runs_its_action() -> None:
    app = app_on_two_ranks()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.focused is app.pane(0))
        await pilot.press("ctrl+p", *"Next rank")
        await pilot.pause(0.3)  # the palette searches in a worker
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is app.pane(1))
        app.session.kill_now()


async def choose_in_palette(pilot: Pilot[int], app: DdptuiApp, query: str, title: str) -> None:
    """Open the palette, type `query`, move to the entry titled `title` and choose it."""
    await pilot.press("ctrl+p", *query)
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    found = app.screen.query_one(CommandList)

    def index() -> int | None:
        titles = [option.hit.text for option in found.options]
        return titles.index(title) if title in titles else None

    await until(pilot, lambda: index() is not None)
    await pilot.pause(0.3)  # the palette searches in a worker: let every hit arrive and be sorted
    await until(pilot, lambda: found.highlighted is not None)
    wanted = index()
    assert wanted is not None
    while found.highlighted != wanted:
        assert found.highlighted is not None and found.highlighted < wanted, (found.highlighted, wanted)
        await pilot.press("down")
    await pilot.press("enter")


async def test_choosing_a_colon_command_that_takes_an_argument_begins_it_on_the_command_line() -> None:
    app = app_on_two_ranks()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.focused is app.pane(0))
        await choose_in_palette(pilot, app, "until", ":until")
        line = app.command_bar.input
        await until(pilot, lambda: app.focused is line)
        assert (line.value, line.cursor_position) == (":until ", len(":until "))
        assert app.typing_focus.broadcasting  # the bar says BROADCAST: Enter runs the line
        await pilot.press(*"i == 3", "enter")
        lines = app.command_log.lines_text
        await until(pilot, lambda: "(ddptui) :until i == 3" in lines())
        app.session.kill_now()


async def test_choosing_a_colon_command_that_takes_none_runs_it() -> None:
    app = app_on_two_ranks()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all(rank.state.at_prompt for rank in app.session.ranks[:2]))
        await choose_in_palette(pilot, app, "state", ":state")
        lines = app.command_log.lines_text
        await until(pilot, lambda: "(ddptui) :state" in lines())
        await until(pilot, lambda: any("paused" in line for line in lines()))
        assert app.command_bar.input.value == ""
        app.session.kill_now()
