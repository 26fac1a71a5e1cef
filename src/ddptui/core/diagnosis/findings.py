"""`Findings`: what went wrong in a session, found as it runs, and the summary that says it.

A session does not diagnose itself: `Findings` listens to it. A rank found waiting or gone, and
each lockstep step, start a check of every rank's collectives (`VerdictWatch`); torch's DDP error
that names no parameter gets the parameters named; at the end, each rank's last state is said with
the root cause first and hints under well-known failures, and each rank's collective log is kept
in `--log-dir`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from ddptui.core.diagnosis.collectives import Verdict
from ddptui.core.diagnosis.ddp_check import UNUSED_ERROR, explain_unused
from ddptui.core.diagnosis.deaths import REASON_SHOWN, death_of, death_words
from ddptui.core.diagnosis.hints import rank_hint
from ddptui.core.diagnosis.rootcause import ROOT, Failure, tags
from ddptui.core.diagnosis.verdicts import VerdictWatch
from ddptui.core.model.state import WAITING, RankState
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.core.session import wrap
from ddptui.core.session.rank import Rank
from ddptui.core.session.session import Session
from ddptui.core.transport.logs import SessionLog


class Findings:
    """The verdicts and explanations found in one session; created once per session, by its front end."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.verdicts = VerdictWatch(session, session.log)
        """What the ranks' collectives say went wrong (hangs, deadlocks, mismatches)."""
        self._explained = False
        self._reports: list[asyncio.Future[None]] = []
        session.on_state.append(self._state_changed)
        session.lockstep.on_step.append(self.verdicts.after_step)
        session.on_closing.append(self._closing)
        session.on_release.append(self._keep_collectives)
        session.on_restart.append(self._restarted)
        self._verdicts_of: dict[int, list[Verdict]] = {}
        """The verdicts found in each earlier attempt of the job, by attempt number."""
        self._attempt_from = 0
        """Where the verdicts of the attempt now running begin in `verdicts.found`."""

    def _state_changed(self, index: int, state: RankState) -> None:
        """A rank found waiting or gone gets the collectives read; DDP's unnamed parameters named."""
        if (state.phase is WAITING or state.exit_code is not None) and not self.session.closing:
            self.verdicts.trigger()
        crash = state.crash
        if crash is not None and UNUSED_ERROR in crash.message and not self._explained:
            self._explained = True  # every rank fails the same way: one rank names the parameters
            self._reports.append(asyncio.ensure_future(explain_unused(self.session, index)))

    def _restarted(self, index: int) -> None:
        """A new process took a rank: the collective log of the one before is no longer its, and
        the verdicts found so far are the earlier attempt's."""
        self.verdicts.forget(index)
        ended = self.session.ranks[index].attempt - 1
        if ended not in self._verdicts_of:
            self._verdicts_of[ended] = self.verdicts.found[self._attempt_from :]
            self._attempt_from = len(self.verdicts.found)

    def _closing(self) -> None:
        """The session is closing: stop the checks and explanations in progress."""
        self.verdicts.cancel()
        for report in self._reports:
            report.cancel()

    def _keep_collectives(self, log: SessionLog) -> None:
        """Into --log-dir: each rank's collective log as JSON."""
        for index, records in self.verdicts.raw.items():
            if records:
                log.keep(f"collectives-{index}.json", json.dumps(records).encode())

    async def settle(self, timeout: float = 10.0) -> None:
        """Let the findings in progress (verdicts, DDP explanations) be said before the job ends."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self.verdicts.settle()
                if self._reports:
                    await asyncio.wait(self._reports)

    @property
    def mismatched(self) -> bool:
        """True once a collective was found to differ across ranks."""
        return self.verdicts.mismatched

    def summary(self, grouped: bool = False) -> list[str]:
        """Each rank's last state, the root cause first and tagged, with hints under known failures;
        under a rank its launcher restarted, how each earlier attempt ended, tagged the same way.

        `grouped`: ranks whose lines (and hint) would be the same share them, `ranks 1-4,6-63: ...`,
        in the place of the first of them (a person reads it; a script wants a line per rank).
        """
        ranks = self.session.ranks
        failures = [Failure(r.index, r.failed_at, r.state) for r in ranks if r.failed_at is not None]
        waiting = [r.index for r in ranks if r.failed_at is None and r.state.phase is WAITING]
        marks = tags(failures, self.verdicts.found[self._attempt_from :], waiting)
        earlier = self._earlier_marks()
        first = [r for r in ranks if marks.get(r.index) == ROOT]
        groups: list[tuple[list[int], tuple[str, ...]]] = []
        shared: dict[tuple[str, ...], list[int]] = {}
        for rank in first + [r for r in ranks if r not in first]:
            mark = f"  {marks[rank.index]}" if rank.index in marks else ""
            state = "never connected to ddptui" if wrap.absent(rank) else _last_state(rank)
            attempt = f" (attempt {rank.attempt})" if rank.attempts else ""
            hint = rank_hint(rank)
            said = (f"{inert(state)}{attempt}{mark}", *([f"  hint: {hint}"] if hint else []))
            for past in rank.attempts:
                tag = earlier.get((past.number, rank.index))
                said += (
                    f"  attempt {past.number}: {inert(past.state.describe())}{f'  {tag}' if tag else ''}",
                )
            same = shared.get(said) if grouped else None
            if same is None:
                same = shared[said] = []
                groups.append((same, said))
            same.append(rank.index)
        lines = []
        for indices, (text, *under) in groups:
            lines.append(f"{name_ranks(indices)}: {text}")
            lines += under
        if self.session.launcher is not None:
            lines.append(inert(self.session.launcher.describe()))
        return lines

    def _earlier_marks(self) -> dict[tuple[int, int], str]:
        """The root cause and its consequences in each earlier attempt, by (attempt, rank)."""
        by_attempt: dict[int, list[Failure]] = {}
        for rank in self.session.ranks:
            for past in rank.attempts:
                if past.failed_at is not None:
                    by_attempt.setdefault(past.number, []).append(
                        Failure(rank.index, past.failed_at, past.state)
                    )
        return {
            (number, index): mark
            for number, failures in by_attempt.items()
            for index, mark in tags(failures, self._verdicts_of.get(number, ())).items()
        }


def _last_state(rank: Rank) -> str:
    """The rank's state in words; for a rank a signal killed, with what its terminal says of it."""
    death = death_of(rank)
    if death is None:
        return rank.state.describe()
    text, where, reason = death_words(rank.state, death, REASON_SHOWN)
    text += f", {where}" if where else ""
    return f"{text}: {reason}" if reason else text
