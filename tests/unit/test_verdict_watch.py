"""`VerdictWatch` over a plain-Python session: logs kept across deaths, deaths read, chains said once."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ddptui.core.diagnosis.collective_verdict import Verdict
from ddptui.core.diagnosis.rootcause import ROOT, Failure, tags
from ddptui.core.diagnosis.verdicts import VerdictWatch
from ddptui.core.model.output import OutputLog
from ddptui.core.model.state import Crash, RankState
from ddptui.core.model.topology import Topology
from ddptui.rank.protocol import Frame

FIXTURES = Path(__file__).parent / "fixtures"
SITE = "/job/tp_mismatch.py"


class FakeRank:
    """What VerdictWatch reads of a rank."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.state = RankState().running()
        self.output = OutputLog()
        self.final_collectives: list[object] | None = None
        self.crash_frames: tuple[Frame, ...] = ()
        self.transport = SimpleNamespace(linked=True)
        self.answer: list[object] | None = None
        """What the rank sends when asked for its log (None: no answer)."""


class FakeSession:
    """A session whose ranks answer with what the test sets."""

    def __init__(self, count: int) -> None:
        self.ranks = [FakeRank(index) for index in range(count)]
        self.spec = SimpleNamespace(stall_timeout=0.1)
        self.topology = Topology()
        self.topology_reader = SimpleNamespace(read=self.read_topology)

    async def read_topology(self) -> Topology:
        """What the ranks say of their groups (nothing here: groups are named by number)."""
        return self.topology

    def live(self, targets: Iterable[int] | None = None) -> list[FakeRank]:
        """The ranks still alive."""
        return [rank for rank in self.ranks if rank.state.alive]

    async def ask(self, *args: Any, **kwargs: Any) -> dict[int, list[object]]:
        """Every live rank's answer (whatever the request: only the collectives are asked here)."""
        return {r.index: r.answer for r in self.live() if r.answer is not None}

    async def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Whether `condition` holds now (the test moves nothing meanwhile)."""
        return condition()


def tp_logs() -> dict[int, list[Any]]:
    """The captured collective logs of tests/scripts/tp_mismatch.py (rank 2's never read there)."""
    raw = json.loads((FIXTURES / "fr_tp_mismatch.json").read_text())
    return {int(rank): log for rank, log in raw.items()}


def watch(session: FakeSession) -> tuple[VerdictWatch, list[str]]:
    """A watch on `session`, and the lines it says."""
    said: list[str] = []
    return VerdictWatch(session, said.append), said  # type: ignore[arg-type]


def abort(session: FakeSession) -> None:
    """gloo aborts rank 2; ranks 1 and 3 fail with the peer errors gloo gives them."""
    logs = tp_logs()
    for index in (0, 1, 3):
        session.ranks[index].answer = logs[index]
    session.ranks[2].state = session.ranks[2].state.exited(-signal.SIGABRT)
    session.ranks[2].output.append((FIXTURES / "gloo_abort_rank2.log").read_bytes())
    reset = Crash("RuntimeError", "Connection reset by peer", Frame(SITE, 13, "<module>"))
    closed = Crash("RuntimeError", "Connection closed by peer", Frame(SITE, 14, "<module>"))
    session.ranks[3].state = session.ranks[3].state.crashed(reset)
    session.ranks[1].state = session.ranks[1].state.crashed(closed)


def test_a_rank_gloo_aborted_counts_with_the_log_read_before_it_died() -> None:
    session = FakeSession(4)
    mine = [*tp_logs()[3][:2], dict(tp_logs()[3][2], shapes=[[4]], out_shapes=[[4]], state="issued")]
    session.ranks[2].answer = [{**record, "pg": "4"} for record in mine]
    verdicts, said = watch(session)
    asyncio.run(verdicts.refresh())  # read while it ran
    abort(session)
    asyncio.run(verdicts.check())
    assert said[0].startswith(
        "mismatch: group 4 #2 all_reduce at tp_mismatch.py:13: "
        "rank 3 passed [5] float32, rank 2 [4] float32; "
        "gloo aborted rank 2 there (Received data size doesn't match expected size)"
    )
    assert verdicts.raw[2] == session.ranks[2].answer


def test_the_rank_that_passed_the_odd_shape_is_the_root_cause_and_the_aborted_one_its_consequence() -> None:
    session = FakeSession(4)
    abort(session)
    verdicts, said = watch(session)
    asyncio.run(verdicts.check())
    assert len(said) == 1 and said[0].startswith(
        "mismatch: group 4 #2 all_reduce at tp_mismatch.py:13: rank 3"
    )
    failures = [Failure(rank, when, session.ranks[rank].state) for when, rank in enumerate((2, 3, 1))]
    assert tags(failures, verdicts.found) == {
        3: ROOT,
        2: "(consequence of rank 3)",
        1: "(consequence of rank 3)",
    }
    assert tags(failures) == {2: ROOT, 3: "(consequence of rank 2)", 1: "(consequence of rank 2)"}


def test_a_rank_still_waiting_for_the_root_cause_is_its_consequence() -> None:
    crashed = RankState().crashed(Crash("ValueError", "rank 1 broke", None))
    hang = Verdict("hang", "rank 1 is missing", "0", 2, frozenset({1}), waiting=frozenset({0}))
    failures = [Failure(1, 1.0, crashed)]
    assert tags(failures, [hang], waiting=[0]) == {1: ROOT, 0: "(consequence of rank 1)"}
    assert tags(failures, [hang]) == {}, "a rank no longer waiting is not said to wait for it"
    assert tags(failures, [hang], waiting=[2]) == {}


def test_a_consequence_found_after_its_root_was_said_gets_a_line_of_its_own() -> None:
    session = FakeSession(4)
    abort(session)
    before = {index: session.ranks[index].state for index in (0, 1)}
    for index in (0, 1):  # not in the barrier yet as far as the core knows
        session.ranks[index].state = RankState().paused(Frame(SITE, 14, "<module>"), False)
    verdicts, said = watch(session)
    asyncio.run(verdicts.check())
    assert said == [str(verdicts.found[0])] and "→" not in said[0]
    session.ranks[1].state = before[1]
    session.ranks[0].state = before[0].waiting(Frame(SITE, 14, "<module>"), "barrier")
    asyncio.run(verdicts.check())
    asyncio.run(verdicts.check())  # nothing new: nothing said again
    assert said[1:] == [
        "hang: rank 0 waits in WORLD #2 barrier (tp_mismatch.py:14) for ranks 2-3; rank 1 crashed there, "
        "a consequence of the mismatch in group 4 #2 all_reduce at tp_mismatch.py:13"
    ]
    assert len(verdicts.found) == 1


def test_a_log_without_records_does_not_replace_the_last_one_read() -> None:
    session = FakeSession(2)
    first = tp_logs()[0]
    session.ranks[0].answer = first
    verdicts, _ = watch(session)
    asyncio.run(verdicts.refresh())
    session.ranks[0].answer = [{"error": "RuntimeError: the recorder is gone"}]
    logs = asyncio.run(verdicts.refresh())
    assert len(logs[0]) == len(first) and verdicts.raw[0] == first
