"""`eval` requests, bounded: nothing the core asked for runs on once it stopped waiting.

An expression left running on a thread after its reply said "no answer" raced the user's program
once the rank resumed (`sleep(6) or x.add_(1)`, then `c`: `x` changed under the program). So an
evaluation at a paused rank runs on the main thread, at the plain prompt it waits at
(`line_input.hand_over`), as pdb's own `p` would: there, a SIGINT sent to the main thread at the
timeout stops it (`Stopped`, raised by a handler of this module's own, installed for that one
evaluation). What cannot be stopped so — the main thread is elsewhere (running the program, at a
readline prompt) and the expression runs on a ddptui thread, or it is inside C code that takes no
signal (a collective's wait, `os.system`) — is said to be still running; the rank evaluates
nothing else until it ends, and then says `paused` again: the core holds the rank's resume until
then (`Lockstep.hold`).
"""

from __future__ import annotations

import select
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

from ddptui.rank import debugger
from ddptui.rank.asks import Eval
from ddptui.rank.protocol import Reply, Request

STOP_GRACE = 0.5
"""Seconds a stopped evaluation has to end before the reply says it still runs (the core waits
a second past the timeout)."""
STOP_ARRIVAL = 0.25
"""Seconds the main thread waits, once the evaluation ended, for the stop sent to it: taken
there, it never reaches pdb or the program."""
PROMPT_REACH = 0.05
"""Seconds the main thread of an open prompt has to come to its read (the core can see the
prompt a moment before the main thread waits at it)."""

Handle = Callable[[Request], Reply]
"""What answers a request (`ddptui.rank.requests.handle`): never raises an `Exception`."""
Send = Callable[[Reply], None]
"""Sends the reply to the core (the link's `send`)."""
SigintHandler = Callable[[int, types.FrameType | None], Any] | int | signal.Handlers | None
"""What `signal.getsignal` returns (None: a handler C code set)."""


class Stopped(BaseException):
    """Raised in the main thread to stop an evaluation at its timeout. Neither an `Exception` nor a
    `KeyboardInterrupt`: the evaluated code's own `except` clauses let it through."""


_lock = threading.Lock()
"""Guards every evaluation's `state` and `_late`."""
_late: Evaluation | None = None
"""The evaluation the core was told still runs, until it ends."""


def answer(request: Request, handle: Handle, send: Send) -> None:
    """Answer an `eval` request through `send`, once, by its timeout: its value or error, `stopped
    after`, or `still running` (on the request's thread, which waits until then)."""
    with _lock:
        late = _late
    if late is not None:
        send(late.busy(request.id))
        return
    evaluation = Evaluation(request, handle, send)
    if not _hand_over(evaluation.on_main_thread):
        threading.Thread(target=evaluation.on_thread, name="ddptui-eval", daemon=True).start()
    evaluation.bounded()


def _hand_over(work: Callable[[], None]) -> bool:
    """Give `work` to the main thread if it waits at a plain prompt (or comes to it at once)."""
    line_input = sys.modules.get("ddptui.rank.line_input")
    if line_input is None:  # no plain prompt was ever made
        return False
    pdb = debugger.active
    open_prompt = pdb is not None and isinstance(pdb.stdin, line_input.PromptInput)
    return bool(line_input.hand_over(work, PROMPT_REACH if open_prompt else 0.0))


class Evaluation:
    """One `eval` request being answered, and where it stands: `queued` (handed over, not begun),
    `running`, `stopping` (the stop was sent) or `done`.

    The thread that runs it sends the reply when it ends in time (no wake-up of the request's
    thread on the way: the main thread's answer goes out at once); the request's thread sends it
    when the timeout comes first. `_replied` says which did, under `_lock`.
    """

    def __init__(self, request: Request, handle: Handle, send: Send) -> None:
        self.request = request
        self._handle = handle
        self._send = send
        self.state = "queued"
        self.ended = threading.Event()
        """Set once it ended (its reply sent, unless the core was told it still runs)."""
        self.started = time.monotonic()
        self._replied = False
        self._told_running = False
        """The core was told it still runs: it holds the rank's resume until `paused` again."""
        self._on_main = False
        """Running on the main thread."""
        self._stoppable = False
        """Running on the main thread with `_interrupt` as its SIGINT handler."""
        self._armed = False
        """`_interrupt` raises `Stopped` (once, while the request's handler runs)."""
        self._stop_sent = False
        self._stop_taken = False

    # -- the request's thread ---------------------------------------------------------------------
    def bounded(self) -> None:
        """Wait until the timeout; then stop the evaluation where it can be stopped, and if it
        does not end, say what became of it."""
        global _late
        timeout = max(self.request.timeout, 0.01)
        if self.ended.wait(timeout):
            return
        withdrawn = None
        with _lock:
            if self.state == "queued":  # the main thread never came to it (an earlier one runs?)
                self.state, self._replied = "done", True
                never = f"{Eval.STOPPED} after {timeout:g} s, before it began (the prompt never took it)"
                withdrawn = _late.busy(self.request.id) if _late is not None else self._error(never)
            elif self.state == "running" and self._stoppable:
                self.state, self._stop_sent = "stopping", True
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        if withdrawn is not None:
            self._send(withdrawn)
            return
        if self.ended.wait(STOP_GRACE):
            return
        with _lock:
            if self._replied:
                return
            self._replied = self._told_running = True
            _late = self
        self._send(self._error(f"{Eval.STILL_RUNNING} after {timeout:g} s ({self._unstopped()})"))

    def _unstopped(self) -> str:
        """Why a stop did not end it."""
        if self._stoppable:
            return "C code that takes no stop"
        if self._on_main:
            return "SIGINT has a handler of C code: no stop sent"
        return "on a ddptui thread: no plain prompt waited"

    def busy(self, request_id: int) -> Reply:
        """The reply to another request while this evaluation still runs: not evaluated."""
        expr = self.request.args.get("expr", "")
        age = time.monotonic() - self.started
        why = f"{Eval.STILL_RUNNING}: the one asked {age:.0f} s ago, so not evaluated ({expr})"
        return Reply(request_id, False, error=why)

    def _error(self, text: str) -> Reply:
        """An error reply to this request."""
        return Reply(self.request.id, False, error=text)

    # -- where it runs ----------------------------------------------------------------------------
    def on_main_thread(self) -> None:
        """Evaluate on the main thread, at its prompt, where SIGINT stops it (`bounded` sends it)."""
        previous = signal.getsignal(signal.SIGINT)
        stoppable = previous is not None  # else a handler C code set, which could not be put back
        if stoppable:
            signal.signal(signal.SIGINT, self._interrupt)  # before `running`: the stop finds it
        with _lock:
            withdrawn = self.state != "queued"  # `bounded` gave up before the main thread came
            if not withdrawn:
                self.state, self._on_main, self._stoppable = "running", True, stoppable
        reply = None
        try:
            if not withdrawn:
                reply = self._run()
        except Stopped:  # arrived as `_run` was returning
            reply = self._error(self._stopped_why())
        finally:
            self._settle(previous if stoppable else None)
        if reply is not None:
            self._end(reply)

    def on_thread(self) -> None:
        """Evaluate on a ddptui thread (the main thread is not at a plain prompt): no stopping it."""
        with _lock:
            self.state = "running"
        try:
            reply = self._handle(self.request)
        except BaseException as exc:  # SystemExit: this thread's end, not the rank's
            reply = self._error(f"{type(exc).__name__}: {exc}")
        with _lock:
            self.state = "done"
        self._end(reply)

    def _run(self) -> Reply:
        """The request's handler, armed: a SIGINT meanwhile stops it."""
        self._armed = True
        try:
            return self._handle(self.request)
        except Stopped:
            return self._error(self._stopped_why())
        except BaseException as exc:  # SystemExit, KeyboardInterrupt the expression raised: not the rank's
            return self._error(f"{type(exc).__name__}: {exc}")
        finally:
            self._armed = False

    def _interrupt(self, signum: int, frame: types.FrameType | None) -> None:
        """SIGINT while this evaluation has the main thread: stop it (once); never raise after."""
        if self._stop_sent:  # (not a Ctrl-C before it)
            self._stop_taken = True
        if self._armed:
            self._armed = False
            raise Stopped

    def _stopped_why(self) -> str:
        """What stopped the evaluation: the timeout, or a Ctrl-C typed into the rank."""
        if self.state == "stopping":
            return f"{Eval.STOPPED} after {max(self.request.timeout, 0.01):g} s"
        return f"{Eval.STOPPED} by Ctrl-C"

    def _settle(self, previous: SigintHandler) -> None:
        """Done: no stop is sent from now on; one already sent is taken here before the program's
        own SIGINT handler is put back."""
        with _lock:
            sent = self.state == "stopping"
            self.state = "done"
        if previous is None:
            return
        deadline = time.monotonic() + STOP_ARRIVAL
        while sent and not self._stop_taken and time.monotonic() < deadline:
            time.sleep(0.001)  # a signal ends the sleep and runs `_interrupt`, which no longer raises
        signal.signal(signal.SIGINT, previous)

    def _end(self, reply: Reply) -> None:
        """Send the reply, unless the core was told it still runs: then tell it the prompt is
        free again."""
        global _late
        with _lock:
            mine, self._replied = not self._replied, True
            told = self._told_running
            if _late is self:
                _late = None
        if mine:
            self._send(reply)
        self.ended.set()
        if told:
            _free_again()


def _free_again() -> None:
    """Say `paused` again, for the core to lift its hold on the rank's resume; not when the rank
    is not at a prompt, nor when a command waits to be read (`!c` sent anyway: it runs now)."""
    pdb = debugger.active
    if pdb is None:
        return
    try:
        typed = bool(select.select([0], [], [], 0)[0])
    except (OSError, ValueError):
        typed = False
    if not typed:
        pdb.still_paused()
