"""The app's keys as one table, from which its bindings, the palette (`palette`) and the help line
are made.

None of the three can forget a key the others have (harlequin's `HARLEQUIN_ACTIONS` does the same
for its keymaps).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Action:
    """One thing a key does in the app, in the words of each place that shows it."""

    key: str
    """Textual's name of the key (`f10`, `shift+f11`, `ctrl+q`)."""
    action: str
    """The app's action the key runs (`step('n')` runs `action_step('n')`)."""
    description: str
    """The footer's words, also the palette's title."""
    help_label: str
    """The help line's words, after the key (`n`, `:skip`)."""
    help: str
    """The palette's line under the title: what the action does."""
    show: bool = True
    """Shown in the footer (every action is in the palette and the help line)."""
    passing: bool = False
    """Bound only while the app's `check_action` allows it; otherwise the key goes on to the
    focused widget (Escape stops a running `:until`, else it is the pane's)."""

    @property
    def key_label(self) -> str:
        """The key as people write it: `F10`, `Shift+F11`, `Ctrl+Q`."""
        return "+".join(part.upper() if len(part) <= 3 else part.capitalize() for part in self.key.split("+"))

    @property
    def palette_title(self) -> str:
        """The palette's entry: the footer's words and the key, so the palette teaches the keys."""
        return f"{self.description} · {self.key_label}"

    def binding(self) -> Binding:
        """The app's binding; priority, so a pane that types every key into its rank leaves it alone."""
        return Binding(self.key, self.action, self.description, show=self.show, priority=True)


ACTIONS: tuple[Action, ...] = (
    Action(
        "f2",
        "toggle_broadcast",
        "Broadcast/typing",
        "broadcast/typing",
        "Type into the command line (broadcast to the target ranks) or the focused pane",
    ),
    Action("f10", "step('n')", "Next (n)", "n", "Broadcast `n` to the target ranks"),
    Action("f11", "step('s')", "Step (s)", "s", "Broadcast `s` to the target ranks"),
    Action("shift+f11", "step('r')", "Return (r)", "r", "Broadcast `r` to the target ranks"),
    Action("f5", "step('c')", "Continue (c)", "c", "Broadcast `c` to the target ranks"),
    Action(
        "f7",
        "command('until-collective')",
        "To next collective",
        ":until-collective",
        "Every target rank runs to its next collective; a table says whether they agree (:until-collective)",
    ),
    Action(
        "f8",
        "command('skip')",
        "Skip this breakpoint()",
        ":skip",
        "The breakpoint the target ranks last stopped at stops no more (:skip)",
    ),
    Action(
        "f12",
        "interrupt",
        "Interrupt",
        ":interrupt",
        "A running :until stops once its ranks are back; else the target ranks that run stop at the "
        "line each runs (:interrupt)",
    ),
    Action(
        "escape",
        "stop_until",
        "Stop :until",
        "stop :until",
        "A running :until or :until-diverge stops once its ranks are back at their prompts",
        show=False,
        passing=True,
    ),
    Action("f3", "focus_rank(-1)", "Prev rank", "previous rank", "Type into the previous rank"),
    Action("f4", "focus_rank(1)", "Next rank", "next rank", "Type into the next rank"),
    Action(
        "f6",
        "focus_rank(1, True)",
        "Crashed rank",
        "crashed rank",
        "Type into a crashed rank's post-mortem (from one, the next crashed rank)",
    ),
    Action(
        "f9",
        "focus_grid",
        "State grid",
        "state grid",
        "Move the keys to the state grid (shown above 8 ranks)",
        show=False,
    ),
    Action(
        "ctrl+d",
        "detach",
        "Detach",
        "detach",
        "Leave a detached session running; ddptui join opens it again",
        show=False,
    ),
    Action("ctrl+q", "quit", "Quit", "quit", "End every rank and quit (asks first while ranks are alive)"),
)
"""Every key of the app, in the footer's order."""


def bindings() -> list[BindingType]:
    """The app's `BINDINGS`."""
    return [action.binding() for action in ACTIONS]


def help_line() -> str:
    """The keys in one line, as `:help` ends: `F2 broadcast/typing · F10 n · ...`."""
    return " · ".join(f"{action.key_label} {action.help_label}" for action in ACTIONS)
