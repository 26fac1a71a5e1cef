"""`Turns`: broadcasts one at a time, first come first served, cancellation included."""

from __future__ import annotations

import asyncio

from ddptui.core.session.lockstep import Turns


async def take(turns: Turns, name: str, log: list[str], hold: asyncio.Event) -> None:
    """Take a turn the way `Lockstep.broadcast` does, note entering and leaving it."""
    if not turns.take():
        await turns.wait()
    try:
        log.append(f"{name} in")
        await hold.wait()
        log.append(f"{name} out")
    finally:
        turns.done()


async def test_turns_never_overlap_and_go_in_the_order_asked() -> None:
    turns, log, hold = Turns(), [], asyncio.Event()
    tasks = [asyncio.ensure_future(take(turns, name, log, hold)) for name in "abc"]
    await asyncio.sleep(0)
    assert log == ["a in"] and turns.busy
    hold.set()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert log == ["a in", "a out", "b in", "b out", "c in", "c out"]
    assert not turns.busy


async def test_a_broadcast_cancelled_while_it_waits_leaves_the_queue() -> None:
    turns, log, hold = Turns(), [], asyncio.Event()
    first = asyncio.ensure_future(take(turns, "a", log, hold))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(take(turns, "b", log, hold))
    last = asyncio.ensure_future(take(turns, "c", log, hold))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.sleep(0)
    hold.set()
    await asyncio.wait_for(asyncio.gather(first, last), 5)
    assert waiting.cancelled()
    assert log == ["a in", "a out", "c in", "c out"]
    assert not turns.busy


async def test_a_broadcast_cancelled_as_it_is_handed_the_turn_hands_it_on() -> None:
    turns, log, hold = Turns(), [], asyncio.Event()
    assert turns.take()  # held by someone else
    handed = asyncio.ensure_future(take(turns, "b", log, hold))
    last = asyncio.ensure_future(take(turns, "c", log, hold))
    await asyncio.sleep(0)
    turns.done()  # b is handed the turn ...
    handed.cancel()  # ... and cancelled before it runs
    hold.set()
    await asyncio.wait_for(last, 5)
    assert handed.cancelled()
    assert log == ["c in", "c out"]
    assert not turns.busy
