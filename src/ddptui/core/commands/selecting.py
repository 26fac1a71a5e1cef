"""`:` commands that choose the ranks the next commands go to: `:ranks`, `:group`."""

from __future__ import annotations

from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import command
from ddptui.core.model.targets import name_ranks, parse_ranks


@command("ranks", "r", usage=":ranks [0,2-3|all|tp=0]", help="show or set the ranks a command goes to")
async def _ranks(ctx: Context, arg: str) -> Result:
    """Show or set the default targets."""
    session = ctx.session
    return Result((session.set_targets(arg),))


@command(
    "group",
    usage=":group [NAME (0,2-3 | from-compare ROW)]",
    help="name a set of ranks for @NAME CMD and :ranks NAME (from a list, or a row of the last :compare)",
)
async def _group(ctx: Context, arg: str) -> Result:
    """Define a group, or list them."""
    session = ctx.session
    if not arg:
        listed = [f"{name}: {name_ranks(ranks)}" for name, ranks in session.groups.items()]
        return Result(tuple(listed) or ("no groups (:group NAME 0,2-3)",))
    name, _, spec = arg.partition(" ")
    if not name.isidentifier() or name in ("all",):
        return Result((f"a group name is a word, not {name!r}",), error=True)
    source, _, row = spec.strip().partition(" ")
    if source == "from-compare":
        table = ctx.last_compare
        if table is None or not row.strip().isdigit() or not 1 <= int(row) <= len(table.rows):
            return Result(
                ("from-compare ROW: a row number of the last :compare table (1 = first)",), error=True
            )
        ranks = table.rows[int(row) - 1].ranks
    else:
        ranks = parse_ranks(spec, len(session.ranks), session.groups)
    session.set_group(name, ranks)
    return Result((f"group {name}: {name_ranks(ranks)}",))
