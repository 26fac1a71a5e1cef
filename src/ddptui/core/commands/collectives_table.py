"""`:collectives`: the last collectives of each process group side by side across ranks.

Rows are aligned by sequence number, and `≠` marks a row whose ops, shapes or dtypes differ (as
`Record.signature` says). Groups are named in the user's words (`tp group [2,3] (dp=1)`, `WORLD`)
as the job's `Topology` knows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddptui.core.commands.p2p_table import p2p_table
from ddptui.core.commands.plain_table import plain_table
from ddptui.core.diagnosis.collective_records import WORLD, Record, process_groups
from ddptui.core.diagnosis.collectives import group_names
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.topology import Topology

CELL = 44
"""Widest cell of the table, in characters."""


def collectives_table(
    logs: Mapping[int, Sequence[Record]], last: int, topology: Topology | None = None
) -> list[str]:
    """The `last` collectives of each process group side by side across ranks, aligned by sequence
    number; `≠` marks a row whose ops, shapes or dtypes differ. Ranks with identical columns share one.
    """
    lines: list[str] = []
    groups = process_groups(logs)
    names = group_names(groups, topology or Topology())
    for pg in groups:
        seqs = {
            rank: {r.seq: r for r in log if r.pg == pg and not r.p2p} for rank, log in sorted(logs.items())
        }
        seqs = {rank: by_seq for rank, by_seq in seqs.items() if by_seq or pg == WORLD}
        rows = sorted({seq for by_seq in seqs.values() for seq in by_seq})[-last:] if last > 0 else []
        if names[pg]:
            lines.append(names[pg])
        lines += _table(seqs, rows)
    return lines + p2p_table(logs, last)


def _table(seqs: Mapping[int, Mapping[int, Record]], rows: list[int]) -> list[str]:
    """One group's rows: a header, then `≠ #seq cell cell ...` per sequence number."""
    columns: dict[tuple[str, ...], list[int]] = {}
    for rank, by_seq in seqs.items():
        columns.setdefault(tuple(_cell(by_seq.get(seq)) for seq in rows), []).append(rank)
    header = ["seq", *(name_ranks(ranks) for ranks in columns.values())]
    body = [[f"#{seq}", *(cells[index] for cells in columns)] for index, seq in enumerate(rows)]
    marks = ["  "]
    for seq in rows:
        signatures = {by_seq[seq].signature() for by_seq in seqs.values() if seq in by_seq}
        marks.append("≠ " if len(signatures) > 1 else "  ")
    lines = plain_table(header, body, right={0})
    return [(mark + line).rstrip() for mark, line in zip(marks, lines, strict=True)]


def _cell(record: Record | None) -> str:
    """`all_reduce [3] float32 train.py:10`, `(issued)` added while pending, `-` when absent."""
    if record is None:
        return "-"
    text = record.what() + (f" {record.site}" if record.site else "")
    text += "" if not record.pending else f" ({record.state})"
    return text if len(text) <= CELL else text[: CELL - 1] + "…"
