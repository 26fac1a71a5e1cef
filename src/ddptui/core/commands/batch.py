"""`--batch`: the headless front end. Replays commands in lockstep and prints rank-tagged output."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TextIO

from ddptui.core.commands import batch_input
from ddptui.core.commands import registry as commands
from ddptui.core.commands.batch_input import BatchInputError
from ddptui.core.commands.context import Context
from ddptui.core.diagnosis.deaths import death_of, death_words, joined
from ddptui.core.diagnosis.hints import rank_hint
from ddptui.core.model.answers import answer_lines, tagged
from ddptui.core.model.state import NO_STATUS, Phase, RankState
from ddptui.core.model.targets import TargetError
from ddptui.core.model.text import inert, terminal_lines
from ddptui.core.session.lockstep import Broadcast
from ddptui.core.session.session import Session
from ddptui.core.session.wrap import absent

TIMED_OUT = 124
"""Exit status when `--timeout` ended the run (as timeout(1) says it)."""
LOST_HINT = "the rank printed faster than it was shown; --log-dir keeps every byte"
READ_KEPT = 256
"""Answers whose terminal text the transcript keeps (then forgets them all and starts again)."""
UNSENT_SHOWN = 5
"""pdb commands named in the line that says they were not sent."""


def _size(count: int) -> str:
    """A byte count for people."""
    return f"{count / 1048576:.1f} MiB" if count >= 1048576 else f"{count / 1024:.1f} KiB"


class Transcript:
    """Prints each rank's new terminal lines, tagged `[rank N] `, without echoes and prompts.

    Ranks that printed the same lines are printed once, tagged `[ranks 0-3] `, unless `collapse`
    is False (`--no-collapse`). A step's answers (`after_step`) and the next line's echo are
    printed while the next command runs on the ranks (`catch_up`, the lockstep's `on_running`):
    the transcript is off a step's critical path, in the same order.
    """

    def __init__(self, session: Session, out: TextIO, collapse: bool = True) -> None:
        self.session = session
        self.out = out
        self.collapse = collapse
        self._printed: dict[int, int] = {}
        """Output offset printed so far, per rank (-1: a wrapped job's launcher)."""
        self._read: dict[tuple[bytes, str | None], list[str]] = {}
        """Terminal text of recent answers, by the output before the prompt and the echo: in
        lockstep most ranks print the same, and a loop stepped through prints the same again."""
        self._later: list[Callable[[], object]] = []
        """Printing put off until the next `catch_up`, in order."""
        self.unsent: list[str] = []
        """pdb commands skipped since every rank ended, not said yet (`say_unsent`)."""

    def catch_up(self) -> None:
        """Print what was put off (a step's answers and notes, an echo)."""
        if not self._later:
            return
        later, self._later = self._later, []
        for action in later:
            action()
        self.out.flush()

    def sent(self, sent: Broadcast) -> None:
        """A command went out: what happened as it did (ranks not sent it) follows its echo, at the
        `catch_up` that runs right after (the lockstep's `on_running`)."""
        self._later += [functools.partial(self._note_now, text) for text in commands.sending_lines(sent)]

    def stopped(self, sent: Broadcast) -> None:
        """A command's own lockstep step (`:until`'s `c`): its answers as a typed one's."""
        self.after_step({reply.rank: sent.command for reply in sent.replies}, ())

    def after_step(self, echo: dict[int, str], notes: Iterable[str]) -> None:
        """Print the ranks' answers to a step as they are now, then `notes`, at the next `catch_up`."""
        ends = {rank.index: rank.output.end for rank in self.session.ranks}
        launcher = self.session.launcher
        if launcher is not None:
            ends[-1] = launcher.output.end
        self._later.append(functools.partial(self._print_since, echo, ends))
        self._later += [functools.partial(self._note_now, text) for text in notes]

    def flush(self, echo: dict[int, str] | None = None) -> None:
        """Print what every rank printed since the last flush, identical answers once (`[ranks 0-3]`)."""
        self.catch_up()
        self._print_since(echo)
        self.out.flush()

    def _print_since(self, echo: dict[int, str] | None, ends: dict[int, int] | None = None) -> None:
        """Print the ranks' output since the last print, up to `ends` (default: all of it)."""
        self._print_launcher(None if ends is None else ends.get(-1))
        per_rank: dict[int, list[str]] = {}
        read = self._read
        if len(read) > READ_KEPT:
            read.clear()
        for rank in self.session.ranks:
            index = rank.index
            start = self._printed.get(index, 0)
            dropped, data = rank.output.since_with_gap(start)
            end = rank.output.end if ends is None else ends.get(index, start)
            if end < rank.output.end:
                data = data[: max(end - max(start, rank.output.start), 0)]
            self._printed[index] = end
            command = (echo or {}).get(index)
            if data.endswith(rank.prompt):
                data = data[: -len(rank.prompt)]
            key = (data, command)
            lines = read.get(key)
            if lines is None:
                lines = read[key] = answer_lines(data, rank.prompt, command)
            if dropped:
                lines = [f"... {_size(dropped)} not shown ({LOST_HINT})", *lines]
            per_rank[index] = lines
        lines = tagged(per_rank, self.collapse)
        if lines:  # one write a step (with PYTHONUNBUFFERED, a print is a system call)
            self.out.write("".join(f"{line}\n" for line in lines))

    def _print_launcher(self, end: int | None) -> None:
        """A wrapped job's launcher's complete lines since the last print (up to `end`): `[launcher] ...`."""
        launcher = self.session.launcher
        if launcher is None:
            return
        start = max(self._printed.get(-1, 0), launcher.output.start)
        data = launcher.output.since(start)
        if end is not None:
            data = data[: max(end - start, 0)]
        if launcher.alive:
            data = data[: data.rfind(b"\n") + 1]  # a partial line waits for its end
        self._printed[-1] = start + len(data)
        for line in terminal_lines(data):
            print(f"[launcher] {line}", file=self.out)

    def echo(self, line: str) -> None:
        """Print the line being run, `(ddptui) n` (one write: a print is two), at the next `catch_up`."""
        self._later.append(functools.partial(self.out.write, f"(ddptui) {inert(line.strip())}\n"))

    def note(self, text: str) -> None:
        """Print a line from ddptui itself (after what was put off)."""
        self.catch_up()
        self._note_now(text)
        self.out.flush()

    def _note_now(self, text: str) -> None:
        """Print a line from ddptui itself now."""
        print(f"ddptui: {inert(text)}", file=self.out)

    def say_unsent(self) -> None:
        """One line for the pdb commands skipped in a row because every rank had ended."""
        if not self.unsent:
            return
        count, shown = len(self.unsent), ", ".join(self.unsent[:UNSENT_SHOWN])
        more = ", ..." if count > UNSENT_SHOWN else ""
        self.note(f"{count} pdb command{'s' * (count > 1)} not sent, every rank had ended: {shown}{more}")
        self.unsent.clear()


def exit_status(states: list[RankState]) -> int:
    """0 when every rank exited 0; else the first failing rank's status (128+N for signal N)."""
    for state in states:
        code = state.exit_code
        if state.ended_by_ddptui or state.released or code == NO_STATUS:
            return 1  # the run ended before the rank did
        if code:
            return 128 - code if code < 0 else code
    return 0


async def run(
    ctx: Context,
    source: str,
    out: TextIO = sys.stdout,
    timeout: float | None = None,
    collapse: bool = True,
) -> int:
    """Run the batch script `source` (a file, `-` for stdin) against a started session; returns
    the exit status.

    However it ends (end of input, `:quit`, `timeout` seconds passing, a signal cancelling it),
    the ranks are ended and each rank's last state is printed.
    """
    session = ctx.session
    transcript = wired(ctx, out, collapse)
    # a program on a pipe may wait for an answer before it writes the next line
    lines = batch_input.lines(source, on_wait=transcript.catch_up)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            await replay(ctx, lines, transcript)
            await run_out(session)
            await ctx.findings.settle()
            await session.arrivals.wait_launcher()
    except TimeoutError:
        timed_out = True
        transcript.note(f"--timeout {timeout:g} s reached: ending every rank")
    finally:
        await session.close()
        transcript.flush()
        for line in ctx.findings.summary():
            print(line, file=out)
        out.flush()
    return TIMED_OUT if timed_out else final_status(ctx)


def wired(ctx: Context, out: TextIO, collapse: bool = True) -> Transcript:
    """A transcript printing to `out` what the session says and each lockstep step, starting
    with the notices said so far."""
    session = ctx.session
    transcript = Transcript(session, out, collapse)
    for notice in session.notices:
        transcript.note(notice)
    session.on_notice.append(transcript.note)
    session.lockstep.on_running.append(transcript.catch_up)
    ctx.on_stop.append(transcript.stopped)
    return transcript


def final_status(ctx: Context) -> int:
    """The exit status of a run that ended (see `exit_status`); 1 after a collective mismatch."""
    session = ctx.session
    launcher = [session.launcher.state] if session.launcher is not None else []
    here = [rank.state for rank in session.ranks if not absent(rank)]  # not another node's ranks
    status = exit_status(here + launcher)
    return 1 if status == 0 and ctx.findings.mismatched else status


CONFIRM_STUCK = 2.0
"""Seconds at least that a job with a waiting rank must stay settled at the end of input to be stuck
(a rank's own look at a store it joins takes a few requests, longer on a loaded machine)."""


async def run_out(session: Session) -> None:
    """At the end of input: let the job run until every rank is paused, gone, or waiting for good.

    A rank called waiting may be between two waits that end by themselves (a store's connect
    backoff, a peer that is about to come): every rank must stay settled for a stall timeout (and
    CONFIRM_STUCK at least) with one of them waiting before the job counts as stuck.
    """
    everyone = range(len(session.ranks))
    while True:
        await session.wait_settled(everyone)
        waiting = [r for r in session.live(everyone) if r.state.phase is Phase.WAITING]
        if not waiting:
            return
        ranks = session.live(everyone)
        confirm = max(session.spec.stall_timeout, CONFIRM_STUCK)
        if not await session.wait_until(lambda: not session.all_settled(ranks), confirm):  # noqa: B023
            return  # awaited here: the loop variable cannot change under it


async def replay(ctx: Context, lines: AsyncIterator[str], transcript: Transcript) -> None:
    """Print the ranks' first output, then run each line; stops early at `:quit`."""
    session = ctx.session
    await session.arrivals.wait_started()
    await session.wait_settled()
    transcript.flush()
    report_early_deaths(session)
    try:
        async for line in lines:
            if not await run_line(ctx, line, transcript):
                return
    except BatchInputError as exc:
        transcript.note(str(exc))
    finally:
        transcript.say_unsent()


DETACH_IN_BATCH = ":detach leaves the app running: a batch leaves the session at the end of its input"


async def run_line(ctx: Context, line: str, transcript: Transcript) -> bool:
    """Run one line of the batch; False means stop reading (`:quit`)."""
    session = ctx.session
    try:
        parsed = session.parse(line)
    except TargetError as exc:
        transcript.note(str(exc))
        return True
    if parsed.kind == "empty":
        return True
    if parsed.kind == "pdb" and await session.arrivals.wait_restarted():
        await session.wait_settled(range(len(session.ranks)))
        transcript.flush()  # the new processes' first prompts, as at the start
    if parsed.kind == "pdb" and all_gone(session):
        transcript.unsent.append(line.strip())
        return True
    transcript.say_unsent()
    transcript.echo(line)
    if parsed.kind == "ddptui":
        result = await commands.run(ctx, parsed.text)
        transcript.flush({rank.index: result.sent for rank in session.ranks} if result.sent else None)
        for text in result.lines:
            transcript.note(text)
        if result.detach:
            transcript.note(DETACH_IN_BATCH)
        return not result.quit
    await session.wait_settled(range(len(session.ranks)))
    sent, said = await commands.send(ctx, parsed, transcript.sent)
    if sent is None:
        for text in said.lines:
            transcript.note(text)
    else:  # printed while the next command runs
        transcript.after_step({reply.rank: sent.command for reply in sent.replies}, said.lines)
    return True


def all_gone(session: Session) -> bool:
    """True once every rank has ended and no other can come (no launcher of a wrapped job still
    running, no `ddptui listen` waiting for ranks)."""
    launcher = session.launcher
    if session.spec.listen is not None or (launcher is not None and launcher.alive):
        return False
    return not session.live(range(len(session.ranks)))


def report_early_deaths(session: Session) -> None:
    """One stderr line per rank that died before ever reaching a prompt.

    `before its first prompt` is said of a rank that died while starting: before it is known to
    have issued a collective (`deaths.joined`). One that died running the job (gloo aborted it
    in an all_reduce seconds in) is said to have, with what it printed as it died and where its
    main thread was.
    """
    for rank in session.ranks:
        state = rank.state
        if state.alive or rank.paused_count or state.exit_code == 0:
            continue
        death = death_of(rank)
        when = (
            "after it joined the job, before any prompt" if joined(rank, death) else "before its first prompt"
        )
        if state.crash is not None:
            why = f"crashed {when}: {state.crash}"
        elif death is not None:
            text, where, reason = death_words(state, death)
            why = f"{text} {when}" + (f", {where}" if where else "") + (f": {reason}" if reason else "")
        else:
            lines = [ln.strip() for ln in terminal_lines(rank.output.tail(4096)) if ln.strip()]
            why = f"{state.describe()} {when}" + (f": {lines[-1]}" if lines else "")
        print(f"ddptui: rank {rank.index} {inert(why)}", file=sys.stderr)
        if hint := rank_hint(rank):
            print(f"ddptui: hint: {hint}", file=sys.stderr)
