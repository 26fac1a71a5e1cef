"""How a rank answers the core's requests (declared in `ddptui.rank.asks`), on ddptui threads.

Every request runs on a worker thread of its own and is answered within its timeout: a request
that cannot finish (a lock held by the blocked main thread) gets an error reply and its worker is
left behind as a daemon. An `eval` is the exception (`ddptui.rank.evaluation`): at a plain prompt
it runs on the main thread and is stopped at its timeout, and one that cannot be stopped is said to
be still running, never left behind unsaid. Nothing here blocks or kills the rank; only `interrupt`
signals it, its own main thread, as Ctrl-C would. `HANDLERS` pairs every declared kind
with the function that answers it; the link hands requests in through `answer_later`, registered
when the rank connects.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any

from ddptui.rank import breaks, ddp, debugger, eval_guard, progress, replicas, timeouts, topology, until
from ddptui.rank.asks import (
    Ask,
    Breaks,
    CollectiveRecord,
    Collectives,
    Ddp,
    Edit,
    Editing,
    Eval,
    Interrupt,
    Progress,
    Replicas,
    SaveCollectives,
    Skip,
    Skipping,
    Stack,
    Store,
    StoreAddress,
    Summary,
    ThreadStack,
    Timeouts,
    Topology,
    UntilArm,
    UntilDisarm,
    UntilHold,
    UntilPending,
    UntilRelease,
    kind_of,
)
from ddptui.rank.evaluation import answer as answer_eval
from ddptui.rank.frames import is_hidden, location
from ddptui.rank.paths import creates_store, is_library
from ddptui.rank.protocol import (
    PLAIN_INPUT_ENV,
    PLAIN_UNTIL_EDITED,
    STATE_DIR_ENV,
    Frame,
    Message,
    Reply,
    Request,
)
from ddptui.rank.skips import Skips

PROMPT_CLOSING = 1.0
"""Seconds `interrupt` waits for an open prompt to close before it says the rank is paused."""
REPR_LIMIT = 2000
"""Characters of a value's repr sent back at most."""


def answer_later(request: Request, send: Callable[[Message], None]) -> None:
    """Start answering `request`; `send` gets exactly one Reply, in time or with a timeout error."""
    threading.Thread(target=_answer, args=(request, send), name="ddptui-request", daemon=True).start()


def _answer(request: Request, send: Callable[[Message], None]) -> None:
    """Run the handler on a worker thread; reply with its result or say it timed out."""
    if request.kind == Eval.KIND:  # bounded, and stopped at its timeout where it can be
        answer_eval(request, handle, send)
        return
    result: list[Reply] = []
    worker = threading.Thread(
        target=lambda: result.append(handle(request)), name="ddptui-worker", daemon=True
    )
    worker.start()
    worker.join(max(request.timeout, 0.01))
    if result:
        send(result[0])
    else:
        send(Reply(request.id, False, error=f"no answer within {request.timeout:g} s"))


def handle(request: Request) -> Reply:
    """Answer one request with the handler of its declared kind; any failure becomes an error reply
    (arguments the kind does not take too)."""
    kind = kind_of(request.kind, request.args)
    run = None if kind is None else HANDLERS.get(kind)
    if kind is None or run is None:
        return Reply(request.id, False, error=f"unknown request {request.kind!r}")
    try:
        ask = kind.from_args(request.args)
        return Reply(request.id, True, ask.write_reply(run(ask)))
    except Exception as exc:  # the rank must never die of a question
        return Reply(request.id, False, error=f"{type(exc).__name__}: {exc}"[:REPR_LIMIT])


def user_stack() -> tuple[list[types.FrameType], int]:
    """The main thread's frames as pdb shows them (outermost first) and the current one's index.

    At a prompt (or in post-mortem) that is the debugger's stack and frame; otherwise the innermost
    frame of the user's code where the main thread is right now.
    """
    pdb = debugger.active
    if pdb is not None and pdb.stack:
        return [frame for frame, _ in pdb.stack], pdb.curindex
    frames = _live_frames(sys._current_frames().get(threading.main_thread().ident or 0))
    user = [i for i, f in enumerate(frames) if not is_library(f.f_code.co_filename)]
    return frames, (user[-1] if user else len(frames) - 1)


def evaluate(ask: Eval) -> Summary:
    """`eval`: an expression in the current frame, or in stack frame `frame` (as `where` numbers it);
    with `truth`, the value's truth."""
    frames, current = user_stack()
    if not frames:
        raise LookupError("no Python frame to evaluate in")
    index = current if ask.frame is None else ask.frame
    if not 0 <= index < len(frames):
        raise LookupError(f"no frame {index} (the stack has {len(frames)})")
    frame = frames[index]
    pdb = debugger.active
    scope = pdb.curframe_locals if pdb is not None and frame is pdb.curframe else frame.f_locals
    with eval_guard.guarded(ask.peers):
        value = eval(compile(ask.expr, "<ddptui>", "eval"), frame.f_globals, scope)
        if ask.truth:  # the rank's own bool(): a tensor's, a numpy array's, a user class's __bool__
            value = bool(value)
    result = summarize(value)
    result["frame"] = location(frame).to_json()
    return result


def summarize(value: object) -> dict[str, Any]:
    """A JSON-able summary of a value (tensors summarised, long reprs cut)."""
    try:
        from ddptui.rank.summary import summarize as full
    except ImportError:
        text = repr(value)
        return {"type": type(value).__name__, "repr": text[:REPR_LIMIT], "key": text[:REPR_LIMIT]}
    summary: dict[str, Any] = full(value, REPR_LIMIT)
    return summary


def _live_frames(frame: types.FrameType | None) -> list[types.FrameType]:
    """A live stack, outermost first, without ddptui's launcher frames."""
    frames = []
    while frame is not None:
        if not is_hidden(frame):
            frames.append(frame)
        frame = frame.f_back
    return frames[::-1]


def stacks(ask: Stack) -> tuple[ThreadStack, ...]:
    """`stack`: every thread's Python stack (outermost first), ddptui's own threads marked.

    A main thread at a prompt reports the debugger's stack: in post-mortem that is where the
    exception was raised, and either way it leaves out pdb's own frames.
    """
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    main = threading.main_thread().ident
    threads = []
    for ident, frame in sys._current_frames().items():
        if ident == main and debugger.active is not None:  # what `where` shows, not pdb's own frames
            frames = [
                Frame(f.f_code.co_filename, line, f.f_code.co_name) for f, line in debugger.active.stack
            ]
        else:
            frames = [location(f) for f in _live_frames(frame)]
        name = names.get(ident, f"thread {ident}")
        threads.append(ThreadStack(name, ident == main, name.startswith("ddptui-"), tuple(frames)))
    return tuple(threads)


def store(ask: Store) -> StoreAddress | None:
    """`store`: the rendezvous store the main thread is creating in torch's `_create_c10d_store`
    (it retries its connect with a backoff): host, port, and whether this rank is a client of it
    (rank 0 hosts it, unless torchrun's agent does). None when the main thread is elsewhere."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None and not creates_store(frame.f_code.co_filename, frame.f_code.co_name):
        frame = frame.f_back
    if frame is None:
        return None
    given = frame.f_locals
    rendezvous = sys.modules.get("torch.distributed.rendezvous")
    agent = getattr(rendezvous, "_torchelastic_use_agent_store", lambda: False)()
    return StoreAddress(str(given["hostname"]), int(given["port"]), bool(agent) or given["rank"] != 0)


def collectives(ask: Collectives) -> list[CollectiveRecord]:
    """`collectives`: this rank's record of collectives (see `ddptui.rank.collectives`)."""
    if "torch.distributed" not in sys.modules:
        return []
    from ddptui.rank.collectives import collective_log  # type: ignore[import-not-found,unused-ignore]

    log: list[CollectiveRecord] = collective_log(ask.last)
    return log


def save_collectives() -> bool:
    """`save_collectives`: leave the Flight Recorder's dump in the session directory (for --log-dir)."""
    state_dir = os.environ.get(STATE_DIR_ENV)
    if not state_dir or "torch.distributed" not in sys.modules:
        return False
    from ddptui.rank.flight_recorder import write_fr_trace

    path = os.path.join(state_dir, f"fr_trace_rank_{debugger.rank_number()}")
    return write_fr_trace(path) is None


def skip(ask: Skip) -> Skipping:
    """`skip`: change which breakpoints stop; say where this rank last stopped at one."""
    skips = Skips
    if ask.none:
        skips.forget()
    if ask.all is not None:
        skips.everything = ask.all
    skips.add(ask.sites)
    return Skipping(skips.last, tuple(sorted(skips.sites)), skips.everything)


def interrupt(ask: Interrupt) -> bool:
    """`interrupt`: SIGINT to this rank's main thread, not to its process group (a DataLoader
    worker is left alone), so it stops at the line it runs (`opening.on_interrupt`).

    A prompt still open is given `PROMPT_CLOSING` seconds to close (the command that resumes the
    rank may have been typed just before); False when it stays open.
    """
    deadline = time.monotonic() + PROMPT_CLOSING
    while debugger.active is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    return True


def edit(ask: Edit) -> Editing:
    """`edit`: a person types at this rank's prompt: read it through readline (`line_input`)."""
    if os.environ.get(PLAIN_INPUT_ENV) != PLAIN_UNTIL_EDITED:
        return Editing(False)
    from ddptui.rank import line_input

    return Editing(line_input.edit())


HANDLERS: dict[type[Ask[Any]], Callable[[Any], Any]] = dict(
    [
        Eval.answered_by(evaluate),
        Stack.answered_by(stacks),
        Store.answered_by(store),
        Collectives.answered_by(collectives),
        SaveCollectives.answered_by(lambda ask: save_collectives()),
        Skip.answered_by(skip),
        Breaks.answered_by(lambda ask: breaks.listing()),
        Interrupt.answered_by(interrupt),
        Edit.answered_by(edit),
        Ddp.answered_by(lambda ask: ddp.ddp()),
        Replicas.answered_by(lambda ask: replicas.replicas()),
        Timeouts.answered_by(lambda ask: timeouts.user_timeouts()),
        Topology.answered_by(lambda ask: topology.topology()),
        Progress.answered_by(lambda ask: progress.collective_progress()),
        UntilArm.answered_by(lambda ask: until.arm()),
        UntilDisarm.answered_by(lambda ask: until.disarm()),
        UntilPending.answered_by(lambda ask: until.pending()),
        UntilHold.answered_by(lambda ask: until.hold(ask.why)),
        UntilRelease.answered_by(lambda ask: until.release()),
    ]
)
"""Every declared request kind and the function that answers it (`Ask.answered_by` checks the pair)."""
