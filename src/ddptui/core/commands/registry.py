"""Every `:` command, defined once with its help, returning a result both front ends show.

Batch mode prints a `Result` as `ddptui: ...` lines; the app writes the same lines to its command
log. `q`, `quit` and `exit` typed bare mean `:quit` in both. The commands live in families
(`selecting`, `job`, `sending`, `breaking`, `hunting`, `inspecting`), each registering in `table`.
"""

from __future__ import annotations

from ddptui.core.commands import breaking, hunting, inspecting, job, selecting, sending  # noqa: F401  (each registers its commands)
from ddptui.core.commands.context import Context
from ddptui.core.commands.inspecting import evaluate as evaluate
from ddptui.core.commands.inspecting import watch_result as watch_result
from ddptui.core.commands.inspecting import watch_tables as watch_tables
from ddptui.core.commands.result import Result as Result  # the commands' face: front ends use it
from ddptui.core.commands.sending import send as send
from ddptui.core.commands.sending import sending_lines as sending_lines
from ddptui.core.commands.table import COMMANDS as COMMANDS
from ddptui.core.commands.table import commands as commands
from ddptui.core.commands.words import UsageError
from ddptui.core.model.targets import TargetError


async def run(ctx: Context, text: str) -> Result:
    """Run one command line (without its `:`)."""
    name, _, arg = text.strip().partition(" ")
    entry = COMMANDS.get(name)
    if entry is None:
        return Result((f"unknown command :{name} (:help lists the commands)",), error=True)
    try:
        return await entry.run(ctx, arg.strip())
    except TargetError as exc:
        return Result((str(exc),), error=True)
    except UsageError as exc:
        return Result((f"usage: {entry.usage} ({exc})",), error=True)
