"""Tables drawn by rich as plain text lines: columns two spaces apart, cells as data, no trailing space."""

from ddptui.core.commands.plain_table import plain_table
from ddptui.core.commands.until import Stop, stop_from, table


def test_columns_are_as_wide_as_their_widest_cell_and_cells_are_never_markup() -> None:
    lines = plain_table(
        ["seq", "rank 0", "rank 1"], [["#3", "[bold]x[/] →", "-"], ["#12", "-", "y"]], right={0}
    )
    assert lines == [
        "seq  rank 0        rank 1",
        " #3  [bold]x[/] →  -",
        "#12  -             y",
    ]


def test_a_short_row_leaves_the_last_columns_empty_and_a_long_cell_is_never_cut() -> None:
    wide = "w" * 300
    assert plain_table(["a", "b", "c"], [["1"], ["2", wide, "3"]]) == [
        f"a  b{' ' * 299}  c",
        "1",
        f"2  {wide}  3",
    ]
    assert plain_table(["seq", "ranks 0-1"], []) == ["seq  ranks 0-1"]


def test_until_collectives_table_keeps_its_columns() -> None:
    site = ["[red]train.py", 8, "f"]
    value = {"seq": 3, "op": "all_reduce", "shapes": [[3], [2, 4]], "dtypes": ["float32"], "site": site}
    stops = [stop_from(rank, "paused", value, inside=False) for rank in (0, 2)]
    stops.append(stop_from(1, "waiting", dict(value, state="started"), inside=True))
    assert table([*stops, Stop(3, "exited 0")]) == [
        "rank  seq  op          shapes     dtypes   at",
        "0,2   #3   all_reduce  [3],[2,4]  float32  [red]train.py:8",
        "1     #3   all_reduce  [3],[2,4]  float32  [red]train.py:8 (waiting in it)",
        "3     -    exited 0",
    ]
