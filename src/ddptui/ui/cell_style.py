"""Rich styles for the cells of an emulated terminal: pyte's colours and attributes to rich's."""

from __future__ import annotations

from rich.color import Color, ColorParseError
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from ddptui.term.screen import Attr

_PYTE_COLOURS = {
    "black": "black",
    "red": "red",
    "green": "green",
    "brown": "yellow",
    "blue": "blue",
    "magenta": "magenta",
    "cyan": "cyan",
    "white": "white",
    "brightblack": "bright_black",
    "brightred": "bright_red",
    "brightgreen": "bright_green",
    "brightbrown": "bright_yellow",
    "brightblue": "bright_blue",
    "brightmagenta": "bright_magenta",
    "bfightmagenta": "bright_magenta",  # pyte 0.8.2's name for `CSI 105 m`
    "brightcyan": "bright_cyan",
    "brightwhite": "bright_white",
}
"""pyte's colour names (yellow is "brown") to rich's."""


def pyte_colour(name: str) -> Color | None:
    """A rich colour for a pyte colour name or "rrggbb"; None for "default" or garbage."""
    if name in _PYTE_COLOURS:
        return Color.parse(_PYTE_COLOURS[name])
    if len(name) == 6:
        try:
            return Color.parse("#" + name)
        except ColorParseError:
            return None
    return None


def attr_style(attr: Attr) -> Style:
    """The rich style of an `Attr`; default colours stay unset so the widget's colours show."""
    return Style(
        color=pyte_colour(attr.fg),
        bgcolor=pyte_colour(attr.bg),
        bold=attr.bold or None,
        italic=attr.italics or None,
        underline=attr.underscore or None,
        strike=attr.strikethrough or None,
        reverse=attr.reverse or None,
        blink=attr.blink or None,
    )


def reverse_cell(strip: Strip) -> Strip:
    """The strip with reverse video toggled: how the cursor is drawn."""
    return Strip(
        Segment(text, (style or Style()) + Style(reverse=not (style and style.reverse)))
        for text, style, _ in strip
    )
