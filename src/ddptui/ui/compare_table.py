"""`CompareTable`: one expression compared across ranks — ranks grouped by value, odd groups marked."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from ddptui.core.diagnosis.compare import Comparison, Row
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.ui.rank_sparkline import RankSparkline


def row_text(row: Row, width: int) -> Text:
    """`≠ rank 1 │ nan`: odd groups bold in the warning colour, errors red. Values are plain text."""
    style = "red" if row.error else "bold yellow" if row.odd else ""
    value = inert(f"raised {row.text}" if row.error else row.text)
    line = f"{'≠' if row.odd else ' '} {name_ranks(row.ranks)} │ {value}"
    return Text(line if len(line) <= width else line[: width - 1] + "…", style)


class CompareTable(Vertical):
    """A titled table of one `Comparison`, with its sparkline when the values are numbers."""

    DEFAULT_CSS = """
    CompareTable {
        height: auto;
        padding: 0 0 1 0;
    }
    CompareTable > .title {
        text-style: bold;
    }
    CompareTable > .notes {
        color: $warning;
    }
    CompareTable > .notes.-empty {
        display: none;
    }
    """

    comparison: reactive[Comparison | None] = reactive(None)
    """What is shown."""
    title: reactive[str] = reactive("")
    """`:compare loss` or `watch loss`."""

    def compose(self) -> ComposeResult:
        """Title, notes (hidden when there are none), rows, sparkline, drawn from what is set now."""
        yield Static(self._head(), classes="title")
        notes = self._notes()
        yield Static(notes, classes="notes" if notes else "notes -empty")
        yield Static(self._rows(), classes="rows")
        sparkline = RankSparkline()
        sparkline.comparison = self.comparison
        yield sparkline

    def show(self, title: str, comparison: Comparison) -> None:
        """Show a new table."""
        self.title, self.comparison = title, comparison

    def watch_comparison(self) -> None:
        """Redraw."""
        self._draw()

    def watch_title(self) -> None:
        """Redraw."""
        self._draw()

    def _head(self) -> Text:
        """`:compare loss · 4 distinct values`."""
        comparison = self.comparison
        return Text(f"{inert(self.title)} · {comparison.verdict}" if comparison else inert(self.title))

    def _notes(self) -> Text:
        """The ranks that differ from their DTensor replicas, one per line (or why none is named)."""
        notes = self.comparison.notes if self.comparison else ()
        return Text("\n".join(inert(note) for note in notes))

    def _rows(self) -> Text:
        """One line per group of ranks."""
        width = max(self.size.width, 48)
        rows = self.comparison.rows if self.comparison else ()
        return Text("\n").join(row_text(row, width) for row in rows)

    def _draw(self) -> None:
        """Refill the title, the notes, the rows and the sparkline."""
        if not self.is_mounted or not self.children:
            return
        self.query_one(".title", Static).update(self._head())
        notes = self._notes()
        shown = self.query_one(".notes", Static)
        shown.update(notes)
        shown.set_class(not notes, "-empty")
        self.query_one(".rows", Static).update(self._rows())
        self.query_one(RankSparkline).comparison = self.comparison
