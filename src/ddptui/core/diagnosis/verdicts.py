"""`VerdictWatch`: reads every rank's collective log when something may be wrong, says each verdict once.

Checks run when a rank is found waiting (a hang starts), after each lockstep step (a mismatch
shows at the step that issued it) and when a rank exits. A check asks every live rank for its log
(answered by a ddptui thread, also while the rank is blocked inside a collective) and keeps the
last log of ranks that exited (sent with their `exited` event); a rank killed by a signal sends
none, so the last log read from it stays, and its terminal says how it died and where its main
thread stood. Then `collectives.diagnose` runs. A verdict is said once, with its consequences;
a consequence found after its root was said gets a line of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ddptui.core.diagnosis.collective_records import Record, parse_log
from ddptui.core.diagnosis.collectives import RankStatus, Verdict, diagnose
from ddptui.core.diagnosis.deaths import death_of
from ddptui.core.model.fatal import FatalDeath
from ddptui.core.model.state import Phase
from ddptui.core.model.topology import Topology
from ddptui.core.transport.interface import answered
from ddptui.rank.asks import Collectives

if TYPE_CHECKING:
    from ddptui.core.session.rank import Rank
    from ddptui.core.session.session import Session

STEP_CHECK_INTERVAL = 1.0
"""Seconds between two checks caused by lockstep steps."""
LOG_TIMEOUT = 2.0
"""Seconds a rank has to send its collective log."""
SETTLE_MARGIN = 2.0
"""Seconds past the stall timeout a hang's missing rank gets to be found waiting."""


class VerdictWatch:
    """The verdicts found so far in a session, and the checks that find them."""

    def __init__(self, session: Session, say: Callable[[str], None]) -> None:
        self.session = session
        self.found: list[Verdict] = []
        """Every verdict said, in order."""
        self.logs: dict[int, list[Record]] = {}
        """The last collective log known of each rank."""
        self.raw: dict[int, list[object]] = {}
        """The same logs as the ranks sent them (JSON), for --log-dir."""
        self._say = say
        self._said: set[tuple[str, str, int, frozenset[int]]] = set()
        """Verdicts already said, by what they are about (their wording follows the ranks' states)."""
        self._deaths: dict[int, tuple[int, FatalDeath | None]] = {}
        """How each rank killed by a signal died, with the end of its output it was read at."""
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._stepped = 0.0

    def forget(self, index: int) -> None:
        """A new process took rank `index` (its launcher restarted the job): what its log said was
        the process before's; what was said is said again if the new attempt does it again."""
        self.logs.pop(index, None)
        self.raw.pop(index, None)
        self._deaths.pop(index, None)
        self._said.clear()

    def after_step(self) -> None:
        """Check after a lockstep step, for a mismatch it may have issued — but only in a job known
        to use collectives, and at most once a second: a step must not pay for N log reads."""
        now = time.monotonic()
        if any(self.logs.values()) and now - self._stepped >= STEP_CHECK_INTERVAL:
            self._stepped = now
            self.trigger()

    def trigger(self) -> None:
        """Check soon; checks never overlap, and one asked for during a check runs after it."""
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        """Check until no more checks were asked for."""
        self._again = True
        while self._again:
            self._again = False
            await self.check()

    async def check(self) -> list[Verdict]:
        """Read the logs, diagnose, say and return the verdicts not said before."""
        await self.refresh()
        if not any(self.logs.values()):
            return []
        verdicts = self._diagnose()
        moving = self._moving(verdicts)
        if moving:
            # A rank missing from a collective, or not back from one a verdict is about, and
            # still called running may be idle, about to be called waiting (the stall watch takes
            # its timeout, longer on a loaded machine): wait that long, so the verdict says where
            # it stands. A rank busy in a loop stays running, and is said to be.
            session = self.session
            await session.wait_until(
                lambda: not any(self._running(rank) for rank in moving),
                session.spec.stall_timeout + SETTLE_MARGIN,
            )
            await self.refresh()
            verdicts = self._diagnose()
        new = []
        for verdict in verdicts:
            new += self._news(verdict)
        for verdict in new:
            self._say(str(verdict))
        return new

    def _moving(self, verdicts: list[Verdict]) -> set[int]:
        """Ranks still called running that the verdicts are about: missing from a hang's
        collective, or with their last collective one of the verdicts' and not back from it."""
        chained = [verdict for root in verdicts for verdict in root.chain()]
        places = {(verdict.pg, verdict.seq) for verdict in chained}
        about = {rank for verdict in chained if verdict.kind == "hang" for rank in verdict.suspects}
        for index, log in self.logs.items():
            final = next((record for record in reversed(log) if not record.p2p), None)
            if final is not None and final.pending and (final.pg, final.seq) in places:
                about.add(index)
        return {rank for rank in about if self._running(rank)}

    def _news(self, root: Verdict) -> list[Verdict]:
        """What is new in a root's chain: all of it, or the consequences found since it was said."""
        if _about(root) not in self._said:
            self._said.update(_about(verdict) for verdict in root.chain())
            self.found.append(root)
            return [root]
        later = [v for v in root.consequences if _about(v) not in self._said]
        self._said.update(_about(verdict) for verdict in later)
        return [root.follow_up(verdict) for verdict in later]

    def _diagnose(self) -> list[Verdict]:
        """The verdicts of the logs known now, with the ranks' states now."""
        statuses = {rank.index: RankStatus.of(rank.state, self._death(rank)) for rank in self.session.ranks}
        return diagnose(self.logs, statuses, self.topology)

    def _death(self, rank: Rank) -> FatalDeath | None:
        """How a rank killed by a signal died, read again only when its terminal grew (gloo's
        `what()` may be read from the pty after the exit)."""
        end = rank.output.end
        known = self._deaths.get(rank.index)
        if known is None or known[0] != end:
            known = self._deaths[rank.index] = (end, death_of(rank))
        return known[1]

    @property
    def topology(self) -> Topology:
        """The job's groups and meshes as the session knows them (read with every log)."""
        return self.session.topology

    def _running(self, index: int) -> bool:
        """True for a rank starting or running: not yet found waiting, paused or gone."""
        state = self.session.ranks[index].state
        return state.alive and state.phase in (Phase.STARTING, Phase.RUNNING)

    async def refresh(self) -> Mapping[int, list[Record]]:
        """Ask every linked live rank for its log; keep the last one of ranks that cannot answer."""
        session = self.session
        before = dict(self.raw)
        for rank in session.ranks:
            if rank.final_collectives is not None:
                self.raw[rank.index] = rank.final_collectives
                self.logs[rank.index] = parse_log(rank.final_collectives)
        asked = [r.index for r in session.live(range(len(session.ranks))) if r.transport.linked]
        logs, _ = await asyncio.gather(
            session.ask(Collectives(), asked, LOG_TIMEOUT), session.topology_reader.read()
        )
        for index, log in answered(logs).items():
            self.raw[index] = list(log)
            self.logs[index] = parse_log(log)
        self._keep_records(before)
        return self.logs

    def _keep_records(self, before: Mapping[int, list[object]]) -> None:
        """A log without records (an error entry, a recorder gone as the rank died) does not
        replace one that had them: the last records read still say where the rank was."""
        for index, raw in before.items():
            if not self.logs.get(index) and parse_log(raw):
                self.raw[index], self.logs[index] = raw, parse_log(raw)

    async def settle(self) -> None:
        """Finish the check in progress, then check once more (before a front end ends the job)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task])
        await self.check()

    def cancel(self) -> None:
        """Stop a check in progress (the session is closing)."""
        if self._task is not None:
            self._task.cancel()

    @property
    def mismatched(self) -> bool:
        """True once a collective was found to differ across ranks."""
        return any(verdict.kind == "mismatch" for verdict in self.found)


def _about(verdict: Verdict) -> tuple[str, str, int, frozenset[int]]:
    """What a verdict is about: the same finding, reworded as states change, is said once."""
    return verdict.kind, verdict.pg, verdict.seq, verdict.suspects
