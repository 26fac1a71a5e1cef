"""How a rank that died of a fatal signal went, in words, and whether it had joined the job first.

A rank killed by a signal says nothing on its link: its terminal holds what the C++ runtime printed
(gloo's `terminate called ... what(): ...`) and the fatal dump the core appended (`model.fatal`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddptui.core.diagnosis.collective_records import parse_log
from ddptui.core.model.fatal import DEATH_TAIL, FatalDeath, read_death
from ddptui.core.model.state import NO_STATUS, RankState
from ddptui.rank.collectives import OPS

if TYPE_CHECKING:
    from ddptui.core.session.rank import Rank

REASON_SHOWN = 160
"""Characters of a death's reason a one-line summary shows (as a crash's message)."""
_C10D = "distributed_c10d.py"


def death_of(rank: Rank) -> FatalDeath | None:
    """How the rank died, when a signal killed it and its terminal tells (never for a rank ended
    by ddptui, whose SIGKILL is no news)."""
    state = rank.state
    code = state.exit_code
    if code is None or code >= 0 or code == NO_STATUS or state.ended_by_ddptui:
        return None
    return read_death(rank.output.tail(DEATH_TAIL))


def joined(rank: Rank, death: FatalDeath | None) -> bool:
    """True once the rank is known to have issued a collective: the log it sent as it exited holds
    one, or its last stack (its traceback, or the main thread of its fatal dump) stands in one.

    What tells a rank that died while starting (importing, launching, rendezvous) from one that
    died running the job.
    """
    if rank.final_collectives and parse_log(rank.final_collectives):
        return True
    calls = [frame.func for frame in rank.crash_frames if frame.file.endswith(_C10D)]
    if death is not None and death.call:
        calls.append(death.call)
    return any(call in OPS for call in calls)


def death_words(state: RankState, death: FatalDeath, shown: int | None = None) -> tuple[str, str, str]:
    """`("killed by SIGABRT", "its main thread at train.py:13 (in all_reduce)", "gloo::EnforceNotMet:
    ...")`: the state, where the main thread was (when the dying thread said nothing, else empty),
    and the reason when it says more than the signal (`shown` characters of it at most)."""
    where = f"its main thread {death.site}" if death.site and not state.fatal_site else ""
    reason = death.reason if death.what or not state.fatal_site else ""
    if shown is not None and len(reason) > shown:
        reason = reason[: shown - 3] + "..."
    return state.describe(), where, reason
