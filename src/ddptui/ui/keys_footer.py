"""`KeysFooter`: Textual's footer, composed again only when the keys it shows change."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[tuple[str, str, str, bool, str], ...]


class KeysFooter(Footer):
    """Textual recomposes its footer (a widget per key) whenever the focus moves, in case the
    focused widget brings keys of its own: twice per F3/F4, 15 ms each with eight panes on this
    machine. ddptui's keys are the app's wherever the focus is, so this footer is composed again
    only when the keys it would show differ from those it shows.
    """

    def __init__(self) -> None:
        super().__init__()
        self._drawn: Shown | None = None

    def bindings_changed(self, screen: Screen[object]) -> None:
        """Recompose (as Textual does) unless the shown keys are the same as last time."""
        shown = keys_shown(screen)
        if shown == self._drawn:
            return
        super().bindings_changed(screen)
        if screen.app.app_focus and self.is_attached and screen is self.screen:  # it will recompose
            self._drawn = shown


def keys_shown(screen: Screen[object]) -> Shown:
    """What the footer shows of a screen's active bindings: key, words, action, enabled, tooltip."""
    return tuple(
        (binding.key, binding.description, binding.action, enabled, tooltip)
        for _, binding, enabled, tooltip in screen.active_bindings.values()
        if binding.show
    )
