"""Ranks a launcher restarted, as the link server takes them: each new process takes its rank,
a claim on a rank whose process is still linked is refused, and the summary says how each
attempt ended, root cause and all."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from ddptui.core.diagnosis.findings import Findings
from ddptui.core.session.session import Session
from ddptui.core.transport.channel import ChannelServer
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank import protocol
from ddptui.rank.protocol import Crashed, Exited, Frame, Hello, Identity, Welcome

TOKEN = "0" * 32


async def claim(path: str, rank: int, restarts: int) -> tuple[Welcome, asyncio.StreamWriter]:
    """Connect as rank `rank` of 2 after `restarts` restarts; the core's answer, and the link."""
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(
        Hello(protocol.VERSION, TOKEN, Identity(rank, rank, 2, "node", os.getpid()), restarts).encode()
    )
    welcome = protocol.decode(await asyncio.wait_for(reader.readline(), 5))
    assert isinstance(welcome, Welcome)
    return welcome, writer


async def end(writer: asyncio.StreamWriter, *said: protocol.Message) -> None:
    """Say the messages, then hang up."""
    writer.write(b"".join(message.encode() for message in said))
    writer.close()
    await writer.wait_closed()


async def test_each_attempt_takes_its_rank_and_keeps_its_root_cause(tmp_path: Path) -> None:
    session = Session(LaunchSpec(target="torchrun", nproc=0, command=("torchrun", "train.py")))
    findings = Findings(session)
    path = str(tmp_path / "link.sock")
    server = ChannelServer(path, TOKEN, session.arrivals.arrived, session.log)
    await server.start()
    try:
        links = [(await claim(path, rank, 0))[1] for rank in (0, 1)]
        crash = Crashed("RuntimeError", "boom", (Frame("train.py", 5, "<module>"),))
        await end(links[1], crash, Exited(1))
        assert await session.wait_until(lambda: session.ranks[1].state.exit_code == 1, 5)
        refused, turned_away = await claim(path, 0, 1)  # rank 0's process is still linked
        why = f"rank 0 is pid {os.getpid()}, which is still running"
        assert refused == Welcome(refused=why)
        assert session.notices[-1] == f"rank 0 (pid {os.getpid()}) refused: {why}; it runs undebugged"
        turned_away.close()
        await end(links[0], Exited(-signal.SIGTERM))  # torchrun ends the others
        assert await session.wait_until(lambda: session.ranks[0].state.exit_code is not None, 5)
        links = [(await claim(path, rank, 1)) for rank in (0, 1)]
        assert [welcome for welcome, _ in links] == [Welcome(), Welcome()]
        assert [rank.attempt for rank in session.ranks] == [2, 2]
        assert [rank.state.alive for rank in session.ranks] == [True, True]
        assert session.ranks[0].output.since(0).endswith("── attempt 2 (torchrun restart 1) ──\r\n".encode())
        for _, writer in links:
            await end(writer, Exited(0))
        assert await session.wait_until(lambda: all(r.state.exit_code == 0 for r in session.ranks), 5)
    finally:
        await server.close()
    assert findings.summary() == [
        "rank 0: exited 0 (attempt 2)",
        "  attempt 1: killed by SIGTERM  (consequence of rank 1)",
        "rank 1: exited 0 (attempt 2)",
        "  attempt 1: crashed RuntimeError: boom (train.py:5)  ← root cause",
    ]
