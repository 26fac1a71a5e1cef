"""`RankSparkline`: one bar per rank for a number compared across ranks; NaN and infinities stand out."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ddptui.core.diagnosis.compare import NON_FINITE_SPARKS, Comparison


class RankSparkline(Widget):
    """The sparkline of a `Comparison` (rank → value), rank numbers underneath every 5th bar."""

    DEFAULT_CSS = """
    RankSparkline {
        height: 2;
        width: 1fr;
    }
    RankSparkline.-empty {
        display: none;
    }
    """

    comparison: reactive[Comparison | None] = reactive(None)
    """The comparison whose sparkline is drawn; hidden when it has none."""

    def watch_comparison(self, comparison: Comparison | None) -> None:
        """Hide when there is no sparkline to draw."""
        self.set_class(comparison is None or not comparison.sparkline, "-empty")

    def render(self) -> Text:
        """The bars (non-finite ones in the error colour), then a rank ruler."""
        comparison = self.comparison
        if comparison is None or not comparison.sparkline:
            return Text()
        bars = Text()
        for char in comparison.sparkline:
            bars.append(char, "bold red" if char in NON_FINITE_SPARKS.values() else "green")
        if comparison.scale:
            low, high = comparison.scale
            bars.append(f"  {low:.4g} … {high:.4g}", "dim")
        ruler = "".join(str(rank).ljust(5)[:5] for rank in range(0, len(comparison.sparkline), 5))
        return Text.assemble(bars, "\n", (ruler[: len(comparison.sparkline)], "dim"))
