"""Cross-rank comparison of one expression: which ranks agree, which are odd, at a glance.

Pure logic over the answers ranks give to an `eval`: a summary dict from
`ddptui.rank.summary.summarize` (non-finite floats arrive as the strings "nan", "inf", "-inf"),
or an error string when the expression raised on that rank.

A DTensor held by every rank is judged by its placements (`ddptui.core.diagnosis.placements`):
local shards differ by design along sharded mesh dims and must be equal along replicated ones, so
the odd ranks are those that differ from their replicas, not those outside the largest group.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddptui.core.diagnosis.placements import Replicas, mismatch, replicas
from ddptui.core.model.targets import name_ranks

Summary = dict[str, Any]
"""What `summarize()` returned on a rank, after its JSON trip."""
Answer = Summary | str
"""A rank's answer: a summary, or the error text when the expression raised there."""

SPARKS = "▁▂▃▄▅▆▇█"
"""Sparkline levels, lowest first."""
NON_FINITE_SPARKS = {"nan": "×", "inf": "↑", "-inf": "↓"}
"""Sparkline characters of values off the scale."""
ERROR_SPARK = "·"
"""Sparkline character of a rank where the expression raised."""
SPARK_LABEL = "by rank"
"""Label of the sparkline's line in `Comparison.lines`."""
TENSOR_STATS = ("min", "max", "mean", "norm")
"""Tensor stats shown in a row and compared under a tolerance."""


@dataclass(frozen=True)
class Row:
    """Ranks that gave one value (or raised one error), and how that value reads on one line."""

    ranks: frozenset[int]
    text: str
    """The value's repr or tensor summary line (or the error) on one line; `lines` cuts it."""
    odd: bool
    """Not the one largest group: the ranks worth a look."""
    error: bool
    """The expression raised on these ranks; `text` is the error."""


@dataclass(frozen=True)
class Comparison:
    """Every rank's answer, grouped: value rows largest first, then error rows."""

    rows: tuple[Row, ...]
    verdict: str
    """`all 4 ranks equal`, `3 distinct values, 1 error`, ..."""
    sparkline: str = ""
    """One character per rank, lowest rank first, when every answer is a number; else empty."""
    scale: tuple[float, float] | None = None
    """The finite (lowest, highest) the sparkline spans."""
    notes: tuple[str, ...] = ()
    """What the verdict leaves out: the ranks that differ from their DTensor replicas, or why a
    DTensor was compared as a plain value."""

    def lines(self, width: int = 100) -> list[str]:
        """The table as plain text: verdict, notes, `ranks 0,2-3 │ value` rows (`≠` marks odd),
        sparkline.

        Every line is cut to `width` characters; a verdict too long for one line goes on after a
        `;` or `:`, each further line indented.
        """
        labels = [name_ranks(row.ranks) for row in self.rows]
        column = max(map(len, [*labels, SPARK_LABEL]))
        out = [*_clauses(self.verdict, width), *self.notes]
        for row, label in zip(self.rows, labels, strict=True):
            text = f"raised {row.text}" if row.error else row.text
            out.append(f"{'≠' if row.odd else ' '} {label:<{column}} │ {text}")
        if self.sparkline:
            scale = f"  {_num(self.scale[0])} … {_num(self.scale[1])}" if self.scale else ""
            out.append(f"  {SPARK_LABEL:<{column}} │ {self.sparkline}{scale}")
        return [_cut(line, width) for line in out]


def compare(answers: Mapping[int, Answer], tol: float | None = None) -> Comparison:
    """Group ranks by equal answers (or answers within `tol`, see `within`) and say how they differ;
    a DTensor by what its placements say must agree."""
    values = {rank: answer for rank, answer in answers.items() if isinstance(answer, dict)}
    errors = {rank: answer for rank, answer in answers.items() if not isinstance(answer, dict)}
    value_groups = _ordered(_group(values, tol))
    error_groups = _ordered(_group_errors(errors))
    spark, scale = sparkline(answers)
    placed = _placed(values, tol)
    if isinstance(placed, Replicas):
        rows = _placed_rows(value_groups, placed.odd) + _error_rows(error_groups)
        verdict = _with_errors(placed.verdict(tol), len(errors))
        return Comparison(rows, verdict, spark, scale, tuple(placed.notes()))
    groups = [(*group, False) for group in value_groups] + [(*group, True) for group in error_groups]
    verdict = _verdict(len(value_groups), len(values), len(errors), tol)
    return Comparison(_rows(groups), verdict, spark, scale, (placed,) if placed else ())


def _rows(groups: list[tuple[list[int], str, bool]]) -> tuple[Row, ...]:
    """Rows from (ranks, text, error) groups: all odd but the one largest (all odd on a tie)."""
    sizes = [len(ranks) for ranks, _, _ in groups]
    largest = max(sizes, default=0)
    alone = sizes.count(largest) == 1
    return tuple(
        Row(frozenset(ranks), text, odd=not (alone and len(ranks) == largest), error=error)
        for ranks, text, error in groups
    )


def _placed(values: Mapping[int, Summary], tol: float | None) -> Replicas | str | None:
    """The replica check when every value is a DTensor of one layout; why not, when every value is
    a DTensor but their layouts differ; None when some value is not a DTensor."""
    dtensors = {rank: _dtensor(summary) for rank, summary in values.items()}
    if not dtensors or any(dtensor is None for dtensor in dtensors.values()):
        return None
    checked = replicas(dtensors, lambda a, b: within(values[a], values[b], tol))
    return checked if checked is not None else mismatch(dtensors)


def _dtensor(summary: Summary) -> Any:
    """The `dtensor` entry of a DTensor's summary; None for any other value."""
    info = summary.get("tensor")
    return info.get("dtensor") if isinstance(info, dict) else None


def _placed_rows(groups: list[tuple[list[int], str]], odd: frozenset[int]) -> tuple[Row, ...]:
    """Rows of DTensor values: each group of equal values split into the ranks that agree with
    their replicas and those that do not (odd)."""
    rows = []
    for ranks, text in groups:
        for is_odd in (False, True):
            if part := frozenset(rank for rank in ranks if (rank in odd) == is_odd):
                rows.append(Row(part, text, odd=is_odd, error=False))
    return tuple(rows)


def _error_rows(groups: list[tuple[list[int], str]]) -> tuple[Row, ...]:
    """Rows of ranks where the expression raised: all worth a look."""
    return tuple(Row(frozenset(ranks), text, odd=True, error=True) for ranks, text in groups)


# --- grouping ---------------------------------------------------------------------------------------


def _group(values: Mapping[int, Summary], tol: float | None) -> list[tuple[list[int], str]]:
    """Ranks grouped by equal keys, or greedily within `tol` of each group's first (lowest) rank."""
    groups: list[tuple[Summary, list[int]]] = []
    for rank in sorted(values):
        summary = values[rank]
        for first, ranks in groups:
            if within(first, summary, tol):
                ranks.append(rank)
                break
        else:
            groups.append((summary, [rank]))
    return [(ranks, describe(first)) for first, ranks in groups]


def _group_errors(errors: Mapping[int, Any]) -> list[tuple[list[int], str]]:
    """Ranks grouped by their error text, each shown on one line."""
    groups: dict[str, list[int]] = {}
    for rank in sorted(errors):
        groups.setdefault(_one_line(str(errors[rank])), []).append(rank)
    return [(ranks, text) for text, ranks in groups.items()]


def _ordered(groups: list[tuple[list[int], str]]) -> list[tuple[list[int], str]]:
    """Largest group first, ties by lowest rank."""
    return sorted(groups, key=lambda group: (-len(group[0]), min(group[0])))


def within(a: Summary, b: Summary, tol: float | None) -> bool:
    """Whether two answers group together.

    Without `tol`: equal keys. With it, numbers are within `tol` when |a - b| <= tol * max(1, |a|,
    |b|) — absolute near zero, relative for large values; NaN matches NaN and an infinity only
    itself. Two tensors match when shape, dtype and NaN/inf counts are equal and min, max, mean and
    norm are each within `tol` (a stat both lack matches). A tensor never matches a non-tensor;
    other values still need equal keys. Groups form greedily in rank order against each group's
    first rank, so a chain of small steps does not merge distant values.
    """
    if _key(a) == _key(b):
        return True
    if tol is None:
        return False
    if "tensor" in a or "tensor" in b:
        return "tensor" in a and "tensor" in b and _tensors_within(a["tensor"], b["tensor"], tol)
    if "number" in a and "number" in b:
        return _close(number(a["number"]), number(b["number"]), tol)
    return False


def _key(summary: Summary) -> Any:
    """A summary's grouping key; its repr when a hand-made summary has none."""
    return summary.get("key", summary.get("repr"))


def _tensors_within(a: Mapping[str, Any], b: Mapping[str, Any], tol: float) -> bool:
    """Equal shape, dtype and NaN/inf counts, and every stat within `tol`."""
    if any(a.get(k) != b.get(k) for k in ("shape", "dtype", "nan", "inf")):
        return False
    return all(_close(number(a.get(k)), number(b.get(k)), tol) for k in TENSOR_STATS)


def _close(a: float | None, b: float | None, tol: float) -> bool:
    """Within `tol` (absolute below 1, relative above); NaN matches NaN; None matches None."""
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def number(value: Any) -> float | None:
    """A summary's number back to a float: JSON numbers as they are, "nan"/"inf"/"-inf" decoded."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if value in NON_FINITE_SPARKS:
        return float(value)
    return None


# --- text -------------------------------------------------------------------------------------------


def describe(summary: Summary) -> str:
    """One line for a value: a tensor's summary line, else its repr with whitespace runs folded."""
    info = summary.get("tensor")
    if isinstance(info, dict):
        return describe_tensor(info)
    return _one_line(str(summary.get("repr", "?")))


def describe_tensor(info: Mapping[str, Any]) -> str:
    """`tensor([3, 4], float32, cpu) min=-1.2 max=3 mean=0.1 norm=5.5 nan=1 hash=ab12cdef`.

    A one-element tensor shows its value where the shape goes, as torch prints it (`tensor(0.5,
    float32, cpu)`, `tensor([[0.5]], ...)`), not four equal stats: a table cut to a narrow panel
    still shows it. `≈` before the hash says it was computed from a sample (see
    `ddptui.rank.tensor_summary`).
    """
    sizes = info.get("shape")
    stats = {k: info.get(k) for k in TENSOR_STATS if info.get(k) is not None}
    if sizes is None:
        shape = "?"  # a nested tensor's rows differ in size
    elif _numel(info) == 1 and info.get("max") is not None:
        shape = "[" * len(sizes) + _num(info["max"]) + "]" * len(sizes)  # min = max = mean = the value
        stats = {}
    else:
        shape = "[" + ", ".join(str(size) for size in sizes) + "]"
    head = [shape, str(info.get("dtype", "?")), str(info.get("device", "?"))]
    if info.get("requires_grad"):
        head.append("requires_grad")
    if info.get("local"):
        head.append("local shard")
    parts = [f"tensor({', '.join(head)})"]
    if isinstance(dtensor := info.get("dtensor"), dict):
        parts.append(_describe_dtensor(dtensor))
    parts += [f"{name}={_num(value)}" for name, value in stats.items()]
    parts += [f"{name}={info[name]}" for name in ("nan", "inf") if info.get(name)]
    if info.get("hash"):
        parts.append(f"hash{'≈' if info.get('hash_sampled') else '='}{str(info['hash'])[:8]}")
    if info.get("note"):
        parts.append(f"[{info['note']}]")
    return " ".join(parts)


def _describe_dtensor(dtensor: Mapping[str, Any]) -> str:
    """`of DTensor [8, 4] (Shard(dim=0)) on mesh tp=2`: global shape, placements and mesh."""
    shape = ", ".join(str(size) for size in dtensor.get("global_shape", []))
    placements = ", ".join(str(p) for p in dtensor.get("placements", []))
    mesh = " ".join(f"{name}={size}" for name, size in dict(dtensor.get("mesh", {})).items())
    return f"of DTensor [{shape}] ({placements}) on mesh {mesh}"


def _numel(info: Mapping[str, Any]) -> int:
    """Elements of a tensor, from its shape."""
    return math.prod(int(size) for size in info.get("shape") or [])


def _num(value: Any) -> str:
    """A stat with 4 significant digits; ints whole; non-finite as nan/inf."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    decoded = number(value)
    return str(value) if decoded is None else f"{decoded:.4g}"


def _one_line(text: str) -> str:
    """Fold a multi-line repr (a tensor, a module) onto one line."""
    return " ".join(text.split()) if "\n" in text else text


def _clauses(verdict: str, width: int) -> list[str]:
    """The verdict on as many lines as it needs, broken after a `;` or `:`, later lines indented."""
    lines = [""]
    for clause in re.split(r"(?<=[;:]) ", verdict):
        if lines[-1] and len(lines[-1]) + 1 + len(clause) > width:
            lines.append(f"  {clause}")
        else:
            lines[-1] = f"{lines[-1]} {clause}" if lines[-1] else clause
    return lines


def _cut(line: str, width: int) -> str:
    """`line` cut to `width` characters, `…` marking the cut."""
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def _verdict(groups: int, values: int, errors: int, tol: float | None) -> str:
    """`all 4 ranks equal`, `3 distinct values`, `3 ranks equal, 1 error`, `4 errors`."""
    within_tol = f" (tol {tol:g})" if tol is not None else ""
    if groups == 0:
        return _with_errors("", errors) or "no answers"
    if groups == 1:
        equal = f"{values} rank{'s' if values != 1 else ''} equal"
        head = f"all {equal}" if not errors and values > 1 else equal
    else:
        head = f"{groups} distinct values"
    return _with_errors(f"{head}{within_tol}", errors)


def _with_errors(head: str, errors: int) -> str:
    """`head, 2 errors` (just the errors without a head; just the head without errors)."""
    if not errors:
        return head
    error_text = f"{errors} error{'s' if errors != 1 else ''}"
    return f"{head}, {error_text}" if head else error_text


def sparkline(answers: Mapping[int, Answer]) -> tuple[str, tuple[float, float] | None]:
    """One character per rank (lowest first) scaling each number between the finite extremes,
    with `×` for NaN, `↑`/`↓` for ±inf and `·` where the expression raised; empty when some
    value is not a number (or none is)."""
    numbers: list[float | None] = []
    for rank in sorted(answers):
        answer = answers[rank]
        decoded = number(answer.get("number")) if isinstance(answer, dict) else None
        if decoded is None and isinstance(answer, dict):
            return "", None
        numbers.append(decoded)
    finite = [value for value in numbers if value is not None and math.isfinite(value)]
    if all(value is None for value in numbers):
        return "", None
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    spark = "".join(ERROR_SPARK if value is None else _spark(value, low, high) for value in numbers)
    return spark, ((low, high) if finite else None)


def _spark(value: float, low: float, high: float) -> str:
    """The sparkline character of `value` on the scale `low`..`high` (all equal: a middle bar)."""
    if math.isnan(value):
        return NON_FINITE_SPARKS["nan"]
    if math.isinf(value):
        return NON_FINITE_SPARKS["inf" if value > 0 else "-inf"]
    if high == low:
        return SPARKS[len(SPARKS) // 2 - 1]
    return SPARKS[round((value - low) / (high - low) * (len(SPARKS) - 1))]
