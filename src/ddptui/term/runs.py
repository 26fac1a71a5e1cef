"""A line of pyte cells as runs of equal attributes: the unit the pane draws, one segment each."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

from pyte.screens import Char
from pyte.screens import wcwidth as pyte_wcwidth


class Attr(NamedTuple):
    """The look of a run of cells, as pyte names it (colours are names or "rrggbb")."""

    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False


DEFAULT_ATTR = Attr()
Run = tuple[str, Attr]
"""Text drawn with one `Attr`."""
Line = tuple[Run, ...]
Cells = tuple[Char, ...]
"""A line as pyte cells; the scrollback keeps these and makes runs only for what is shown."""


_DATA = itemgetter(0)
_ATTR_KEY = itemgetter(slice(1, None))  # a Char's fields after `data`, in `Attr` order
_ATTRS: dict[tuple[Any, ...], Attr] = {tuple(DEFAULT_ATTR): DEFAULT_ATTR}


def _intern(key: tuple[Any, ...]) -> Attr:
    """Share one `Attr` per distinct look, so runs and style caches stay small."""
    attr = _ATTRS.get(key)
    if attr is None:
        if len(_ATTRS) > 4096:  # hostile 24-bit colours must not grow this forever
            _ATTRS.clear()
        attr = _ATTRS[key] = Attr._make(key)
    return attr


def _fix_stubs(cells: Iterable[Char]) -> list[Char]:
    """Blank the stub of a wide character that has been overwritten, keeping columns aligned."""
    fixed = []
    after_wide = False
    for cell in cells:
        if not cell.data and not after_wide:
            cell = cell._replace(data=" ")
        after_wide = bool(cell.data) and pyte_wcwidth(cell.data[0]) == 2
        fixed.append(cell)
    return fixed


_RANGE = list(range(1024))


def snapshot(line: dict[int, Char] | None, columns: int) -> Cells:
    """The cells of a pyte line from column 0, cut at `columns`: cheap enough for every scroll.

    Lines written left to right (nearly all) are copied straight from the dict's values.
    """
    if not line:
        return ()
    width = len(line)
    if width <= columns and list(line) == _RANGE[:width]:
        return tuple(line.values())
    return tuple(map(line.__getitem__, range(min(max(line) + 1, columns))))


def cells_to_runs(cells: Cells) -> Line:
    """Runs of equal attributes over `cells`, dropping trailing default blanks."""
    if "" in map(_DATA, cells):
        cells = tuple(_fix_stubs(cells))
    runs = [("".join(map(_DATA, group)), _intern(key)) for key, group in groupby(cells, _ATTR_KEY)]
    if runs and runs[-1][1] is DEFAULT_ATTR:
        text = runs[-1][0].rstrip(" ")
        runs[-1:] = [(text, DEFAULT_ATTR)] if text else []
    return tuple(runs)
