"""`ddptui.rank.evaluation` in this process: an evaluation on the main thread is stopped at its
timeout, and the stop never reaches the code that runs after it."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from ddptui.rank import evaluation
from ddptui.rank.protocol import Reply, Request


@pytest.fixture(autouse=True)
def nothing_left_running() -> Iterator[None]:
    """Every test leaves no evaluation said to run on, and this process's SIGINT handler as it was."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    evaluation._late = None
    assert signal.getsignal(signal.SIGINT) is handler


def on_main_thread(run: Callable[[], object], timeout: float) -> Reply:
    """Evaluate `run` as an `eval` handed to this (the main) thread; the reply `bounded` gave."""
    request = Request(1, "eval", {"expr": "run()"}, timeout)

    def handle(request: Request) -> Reply:
        return Reply(request.id, True, run())

    replies: list[Reply] = []
    job = evaluation.Evaluation(request, handle, replies.append)
    waiter = threading.Thread(target=job.bounded)
    waiter.start()
    job.on_main_thread()
    waiter.join()
    time.sleep(0.01)  # nothing more comes
    (reply,) = replies  # exactly one
    return reply


def test_an_evaluation_that_ends_in_time_answers_its_value() -> None:
    assert on_main_thread(lambda: 42, 1.0) == Reply(1, True, 42)


def test_a_sleep_past_the_timeout_is_stopped_and_nothing_runs_on() -> None:
    after: list[str] = []
    start = time.monotonic()
    reply = on_main_thread(lambda: time.sleep(5) or after.append("ran on"), 0.2)
    assert reply.error == "stopped after 0.2 s"
    assert time.monotonic() - start < 1.5 and not after


def test_code_that_swallows_the_stop_is_said_to_run_on() -> None:
    def stubborn() -> str:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            with contextlib.suppress(BaseException):  # what some programs do, `except:`
                time.sleep(0.01)
        return "done"

    reply = on_main_thread(stubborn, 0.1)
    assert reply.error == "still running after 0.1 s (C code that takes no stop)"


@pytest.mark.parametrize("seconds", [0.045, 0.05, 0.055])
def test_a_stop_that_comes_as_the_evaluation_ends_is_taken_by_it(seconds: float) -> None:
    for _ in range(20):  # never a KeyboardInterrupt or `Stopped` here, whichever comes first
        reply = on_main_thread(lambda: time.sleep(seconds) or "done", 0.05)
        assert reply.ok or reply.error == "stopped after 0.05 s", reply
