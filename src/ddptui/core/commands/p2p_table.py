"""The point-to-point part of `:collectives`: one row per transfer, its send and its recv side by
side in the sender's and the receiver's columns.

A transfer is the k-th op from one rank to another on a group and tag (`0→1 #2`), as
`diagnosis.p2p` pairs them; a recv from any rank still waiting for a sender has a row of its own
(`any→1`). `≠` marks a transfer whose two sides differ in shapes or dtypes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddptui.core.commands.plain_table import plain_table
from ddptui.core.diagnosis.collective_records import WORLD, Record
from ddptui.core.diagnosis.p2p import toward
from ddptui.core.model.targets import name_ranks

CELL = 64
"""Widest cell of the table, in characters."""
Row = dict[int, Record]
"""One transfer: the rank on each side and its record."""


def p2p_table(logs: Mapping[int, Sequence[Record]], last: int) -> list[str]:
    """Per group with point-to-point ops, a heading (`p2p`, `p2p on group 1`) and its last `last`
    transfers, oldest first."""
    lines: list[str] = []
    for pg in _groups(logs):
        rows = _transfers(logs, pg)
        labels = sorted(rows, key=lambda label: _when(rows[label]))[-last:] if last > 0 else []
        lines.append("p2p" if pg == WORLD else f"p2p on group {pg}")
        lines += _table({label: rows[label] for label in labels})
    return lines


def _groups(logs: Mapping[int, Sequence[Record]]) -> list[str]:
    """Groups with point-to-point ops, the default group first."""
    names = {record.pg for log in logs.values() for record in log if record.p2p and record.direction}
    return sorted(names, key=lambda name: (name != WORLD, len(name), name))


def _transfers(logs: Mapping[int, Sequence[Record]], pg: str) -> dict[str, Row]:
    """`0→1 #2` -> the records of that transfer on group `pg`, in the order first seen."""
    rows: dict[str, Row] = {}
    for rank, log in sorted(logs.items()):
        for record in log:
            if record.p2p and record.direction and record.pg == pg:
                rows.setdefault(_label(rank, record), {})[rank] = record
    return rows


def _label(rank: int, record: Record) -> str:
    """`0→1 #2` (with ` tag 5` off tag 0), or `any→1` for a recv still waiting for any sender."""
    tag = f" tag {record.tag}" if record.tag else ""
    if record.peer is None:
        return f"any→{rank}{tag}"
    sender, receiver = (rank, record.peer) if record.direction == "send" else (record.peer, rank)
    return f"{sender}→{receiver} #{record.seq}{tag}"


def _when(row: Row) -> int:
    """When a transfer's first side was issued (0 when the records do not say)."""
    return min(record.time_ns for record in row.values())


def _table(rows: Mapping[str, Row]) -> list[str]:
    """A header of the ranks involved, then `≠ label cell cell ...` per transfer."""
    ranks = sorted({rank for row in rows.values() for rank in row})
    header = ["transfer", *(name_ranks([rank]) for rank in ranks)]
    body = [[label, *(_cell(row.get(rank)) for rank in ranks)] for label, row in rows.items()]
    marks = ["  "]
    for row in rows.values():
        marks.append("≠ " if len({(r.shapes, r.dtypes) for r in row.values()}) > 1 else "  ")
    lines = plain_table(header, body, right={0})
    return [(mark + line).rstrip() for mark, line in zip(marks, lines, strict=True)]


def _cell(record: Record | None) -> str:
    """`send → 1 [3] float32 train.py:9`, `(issued)` added while pending, `-` when absent."""
    if record is None:
        return "-"
    tensors = record.what().partition(" ")[2]
    text = " ".join(part for part in (record.op, toward(record), tensors) if part)
    text += f" {record.site}" if record.site else ""
    text += f" ({record.state})" if record.pending else ""
    return text if len(text) <= CELL else text[: CELL - 1] + "…"
