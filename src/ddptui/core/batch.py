"""`--batch`: the headless front end. Replays commands in lockstep and prints rank-tagged output."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from typing import TextIO

from ddptui.core import commands
from ddptui.core.session import Broadcast, Session
from ddptui.core.state import Phase, RankState
from ddptui.core.targets import TargetError
from ddptui.core.text import terminal_lines


async def stdin_lines() -> AsyncIterator[str]:
    """Lines of standard input, read on a daemon thread so a blocked read never holds up exit."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def reader() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=reader, daemon=True, name="ddptui-stdin").start()
    while (line := await queue.get()) is not None:
        yield line


async def file_lines(path: str) -> AsyncIterator[str]:
    """Lines of a batch file."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            yield line


class Transcript:
    """Prints each rank's new terminal lines, tagged `[rank N] `, without echoes and prompts."""

    def __init__(self, session: Session, out: TextIO) -> None:
        self.session = session
        self.out = out
        self._printed = [0] * len(session.ranks)

    def flush(self, echo: dict[int, str] | None = None) -> None:
        """Print what every rank printed since the last flush, in rank order."""
        for rank in self.session.ranks:
            data = rank.output.since(self._printed[rank.index])
            self._printed[rank.index] = rank.output.end
            lines = terminal_lines(data)
            command = (echo or {}).get(rank.index)
            if command is not None and lines and lines[0].strip() == command:
                lines = lines[1:]
            prompt = rank.prompt.decode().rstrip()
            if lines and lines[-1].rstrip() == prompt:
                lines = lines[:-1]
            for line in lines:
                print(f"[rank {rank.index}] {line}", file=self.out)
        self.out.flush()

    def note(self, text: str) -> None:
        """Print a line from ddptui itself."""
        print(f"ddptui: {text}", file=self.out, flush=True)


def exit_status(states: list[RankState]) -> int:
    """0 when every rank exited 0; else the first failing rank's status (128+N for signal N)."""
    for state in states:
        code = state.exit_code
        if state.ended_by_ddptui:
            return 1
        if code:
            return 128 - code if code < 0 else code
    return 0


async def run(session: Session, lines: AsyncIterator[str], out: TextIO = sys.stdout) -> int:
    """Run a batch script against a started session; returns the exit status.

    However it ends (end of input, `:quit`, a signal cancelling it), the ranks are ended and
    each rank's last state is printed.
    """
    transcript = Transcript(session, out)
    for notice in session.notices:
        transcript.note(notice)
    session.on_notice.append(transcript.note)
    try:
        await replay(session, lines, transcript)
        await session.wait_settled(range(len(session.ranks)))
    finally:
        await session.close()
        transcript.flush()
        for rank in session.ranks:
            print(f"rank {rank.index}: {rank.state.describe()}", file=out)
        out.flush()
    return exit_status([rank.state for rank in session.ranks])


async def replay(session: Session, lines: AsyncIterator[str], transcript: Transcript) -> None:
    """Print the ranks' first output, then run each line; stops early at `:quit`."""
    await session.wait_settled()
    transcript.flush()
    report_early_deaths(session)
    async for raw in lines:
        line = raw.rstrip("\r\n")
        try:
            parsed = session.parse(line)
        except TargetError as exc:
            transcript.note(str(exc))
            continue
        if parsed.kind == "empty":
            continue
        print(f"(ddptui) {line.strip()}", file=transcript.out)
        if parsed.kind == "ddptui":
            result = await commands.run(session, parsed.text)
            for text in result.lines:
                transcript.note(text)
            if result.quit:
                return
            continue
        await session.wait_settled(range(len(session.ranks)))
        if not session.live(parsed.targets):
            transcript.note("no live rank to send it to")
            continue
        show(await session.broadcast(parsed.text, parsed.targets), transcript)


def show(result: Broadcast, transcript: Transcript) -> None:
    """Print the answers of one broadcast, then the ranks it could not reach."""
    transcript.flush({reply.rank: result.command for reply in result.replies})
    for index, state in result.skipped.items():
        transcript.note(f"{result.command} not sent to rank {index}, not at a prompt ({state})")
    for reply in result.replies:
        if reply.state.phase is Phase.WAITING:
            transcript.note(f"rank {reply.rank} {reply.state.describe()}")


def report_early_deaths(session: Session) -> None:
    """One stderr line per rank that died before ever reaching a prompt."""
    for rank in session.ranks:
        state = rank.state
        if state.alive or rank.paused_count or state.exit_code == 0:
            continue
        if state.crash is not None:
            why = f"crashed before its first prompt: {state.crash}"
        else:
            lines = [ln.strip() for ln in terminal_lines(rank.output.tail(4096)) if ln.strip()]
            why = f"{state.describe()} before its first prompt" + (f": {lines[-1]}" if lines else "")
        print(f"ddptui: rank {rank.index} {why}", file=sys.stderr)
