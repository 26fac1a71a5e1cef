"""`:` commands that choose the ranks the next commands go to: `:ranks`, `:group`."""

from __future__ import annotations

from dataclasses import dataclass

from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import command
from ddptui.core.commands.words import UsageError, split
from ddptui.core.model.targets import name_ranks, parse_ranks


@command("ranks", "r", usage=":ranks [0,2-3|all|tp=0]", help="show or set the ranks a command goes to")
async def _ranks(ctx: Context, arg: str) -> Result:
    """Show or set the default targets."""
    session = ctx.session
    return Result((session.set_targets(" ".join(split(arg))),))


@dataclass(frozen=True)
class GroupArgs:
    """What `:group NAME (0,2-3 | from-compare ROW)` says: the name and where its ranks come from."""

    name: str
    spec: str = ""
    """The rank list (`0,2-3`), when the ranks are listed."""
    row: int | None = None
    """The row of the last `:compare` table (1 = first), when the ranks come from one."""


def group_args(arg: str) -> GroupArgs | None:
    """`:group`'s words read; None for a bare `:group` (list the groups). UsageError for a missing
    rank list or row, or a row that is not a number."""
    words = split(arg)
    if not words:
        return None
    name, *rest = words
    if not rest:
        raise UsageError(f"no ranks for group {name!r}")
    if rest[0] != "from-compare":
        return GroupArgs(name, spec=" ".join(rest))
    if len(rest) != 2 or not rest[1].isdigit():
        raise UsageError("from-compare ROW: a row number of the last :compare table (1 = first)")
    return GroupArgs(name, row=int(rest[1]))


@command(
    "group",
    usage=":group [NAME (0,2-3 | from-compare ROW)]",
    help="name a set of ranks for @NAME CMD and :ranks NAME (from a list, or a row of the last :compare)",
)
async def _group(ctx: Context, arg: str) -> Result:
    """Define a group, or list them."""
    session = ctx.session
    said = group_args(arg)
    if said is None:
        listed = [f"{name}: {name_ranks(ranks)}" for name, ranks in session.groups.items()]
        return Result(tuple(listed) or ("no groups (:group NAME 0,2-3)",))
    if not said.name.isidentifier() or said.name in ("all",):
        return Result((f"a group name is a word, not {said.name!r}",), error=True)
    if said.row is not None:
        table = ctx.last_compare
        if table is None or not 1 <= said.row <= len(table.rows):
            return Result(
                ("from-compare ROW: a row number of the last :compare table (1 = first)",), error=True
            )
        ranks = table.rows[said.row - 1].ranks
    else:
        ranks = parse_ranks(said.spec, len(session.ranks), session.groups)
    session.set_group(said.name, ranks)
    return Result((f"group {said.name}: {name_ranks(ranks)}",))
