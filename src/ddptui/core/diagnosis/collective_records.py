"""The records of every rank's collectives, as the core reads them, and the words that name them.

A record is one collective as one rank issued it, parsed from what `ddptui.rank.collectives.collective_log`
sends (no I/O, no torch). The verdicts drawn from them are `collectives`', the side-by-side table
`collectives_table`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddptui.rank.protocol import Frame, ProtocolError

WORLD = "0"
"""The default process group's name."""
ALL_TO_ALL = frozenset({"all_to_all", "all_to_all_single", "alltoall", "alltoall_base"})
"""Ops whose per-rank input shapes may legally differ (uneven splits)."""


@dataclass(frozen=True)
class Record:
    """One collective as one rank issued it."""

    seq: int
    op: str
    pg: str = WORLD
    shapes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    state: str = "completed"
    """`issued`, `started`, `completed` or `failed`."""
    site: Frame | None = None
    out_shapes: tuple[tuple[int, ...], ...] = ()
    out_dtypes: tuple[str, ...] = ()
    p2p: bool = False
    pg_desc: str = ""
    pg_name: str = ""
    """The group in the user's words (`tp group [2,3] (dp=1)`), where a front end knows it."""
    peer: int | None = None
    """A point-to-point op's peer, a global rank (None: a recv from any rank, or not p2p)."""
    direction: str = ""
    """`send` or `recv` for a point-to-point op ddptui recorded; empty otherwise."""
    tag: int = 0
    time_ns: int = 0
    """When the rank issued it (wall clock, ns); 0 when not known."""

    @classmethod
    def from_json(cls, value: Any) -> Record:
        """Parse one entry of `collective_log`; raise ValueError on anything malformed."""
        if not isinstance(value, dict) or not isinstance(value.get("seq"), int):
            raise ValueError(f"not a collective record: {value!r:.80}")
        site = value.get("site")
        try:
            return cls(
                seq=value["seq"],
                op=str(value["op"]),
                pg=str(value.get("pg", WORLD)),
                shapes=_shapes(value.get("shapes", [])),
                dtypes=tuple(str(d) for d in value.get("dtypes", [])),
                state=str(value.get("state", "completed")),
                site=None if site is None else Frame.from_json(site),
                out_shapes=_shapes(value.get("out_shapes", [])),
                out_dtypes=tuple(str(d) for d in value.get("out_dtypes", [])),
                p2p=bool(value.get("p2p", False)),
                pg_desc=str(value.get("pg_desc", "")),
                peer=_peer(value.get("peer")),
                direction=_direction(value.get("direction")),
                tag=int(value.get("tag") or 0),
                time_ns=int(value.get("time_ns") or 0),
            )
        except (KeyError, TypeError, ValueError, ProtocolError) as exc:
            raise ValueError(f"not a collective record: {value!r:.80}") from exc

    @property
    def pending(self) -> bool:
        """True while the collective has not returned (as far as the rank's recorder knows)."""
        return self.state in ("issued", "started")

    def signature(self) -> tuple[Any, ...]:
        """What must match across ranks: the op, and the shapes and dtypes that op requires equal."""
        if self.op == "scatter":  # only the root passes inputs; every rank's output must match
            return (self.op, self.out_shapes or self.shapes, self.out_dtypes or self.dtypes)
        if self.op in ALL_TO_ALL:
            return (self.op, None, self.dtypes)
        return (self.op, self.shapes, self.dtypes)

    def same_as(self, other: Record) -> bool:
        """Same signature and, where both are known, the same call site."""
        if self.signature() != other.signature():
            return False
        if self.site is None or other.site is None:
            return True
        return (self.site.file, self.site.line) == (other.site.file, other.site.line)

    def what(self) -> str:
        """`all_reduce [3] float32`: the op with the shapes and dtypes it is compared by."""
        _, shapes, dtypes = self.signature()
        parts = [self.op]
        if shapes is None:
            shapes = self.shapes
        if shapes:
            parts.append(",".join("[" + ",".join(map(str, shape)) + "]" for shape in shapes))
        if dtypes:
            parts.append(",".join(dict.fromkeys(dtypes)))
        return " ".join(parts)

    def describe(self, shapes: bool = True) -> str:
        """`all_reduce [3] float32 (train.py:10)`."""
        text = self.what() if shapes else self.op
        return f"{text} ({self.site})" if self.site else text


def _peer(value: Any) -> int | None:
    """A peer rank from JSON: an int, or None."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise ValueError(f"not a rank: {value!r:.20}")


def _direction(value: Any) -> str:
    """`send`, `recv`, or empty."""
    if value in (None, "", "send", "recv"):
        return value or ""
    raise ValueError(f"not a direction: {value!r:.20}")


def _shapes(value: Any) -> tuple[tuple[int, ...], ...]:
    """Shapes from JSON lists of ints."""
    return tuple(tuple(int(n) for n in shape) for shape in value)


def parse_log(items: Iterable[Any]) -> list[Record]:
    """The records of one rank's `collective_log` reply; error entries and garbage are dropped."""
    records = []
    for item in items:
        try:
            records.append(Record.from_json(item))
        except ValueError:
            continue
    return records


def log_error(items: Iterable[Any]) -> str | None:
    """The error a rank's `collective_log` reported instead of records, if any."""
    for item in items:
        if isinstance(item, dict) and "error" in item:
            return str(item["error"])
    return None


def process_groups(logs: Mapping[int, Sequence[Record]]) -> list[str]:
    """Process groups named in the logs, the default group first."""
    names = {record.pg for log in logs.values() for record in log if not record.p2p}
    return sorted(names, key=lambda name: (name != WORLD, len(name), name))
