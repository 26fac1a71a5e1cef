"""Tables as lines of plain text, drawn by rich: the `:collectives` table, its point-to-point rows and
`:until-collective`'s stops. Cells are data (a rank's file names, its ops): never markup."""

from __future__ import annotations

import io
from collections.abc import Collection, Sequence
from itertools import zip_longest

GAP = 2
"""Spaces between two columns."""


def plain_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """The header's line, then a line per row, columns `GAP` spaces apart, each as wide as its widest
    cell (never wrapped, never cut); the columns numbered in `right` are justified right. No colour,
    no rules, no trailing spaces: lines a transcript shows as they are."""
    # rich takes tens of milliseconds to import: a batch run that prints no table never pays them
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, padding=(0, GAP // 2), show_edge=False, highlight=False)
    for index, name in enumerate(header):
        table.add_column(Text(name), justify="right" if index in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    widths = [max(map(cell_len, column)) for column in zip_longest(header, *rows, fillvalue="")]
    out = io.StringIO()
    console = Console(
        file=out,
        width=sum(widths) + GAP * len(widths),
        color_system=None,
        markup=False,
        highlight=False,
        emoji=False,
        force_terminal=False,
    )
    console.print(table)
    return [line.rstrip() for line in out.getvalue().splitlines()]
