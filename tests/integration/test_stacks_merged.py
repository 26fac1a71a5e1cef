"""`:stacks` on real ranks: a 4-rank gloo hang, and plain-Python ranks paused, asleep, exited, GIL-bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from conftest import SCRIPTS, running_session

from ddptui.core.diagnosis.stack_tree import Node, Stop, merged, render, sample
from ddptui.core.session.session import Session
from ddptui.rank.protocol import Frame

TIMEOUT = 90


def marked(script: Path, name: str) -> int:
    """The line of `script` marked `# @name`."""
    lines = script.read_text().splitlines()
    return next(number for number, text in enumerate(lines, 1) if text.endswith(f"# @{name}"))


async def sampled_until(
    session: Session, condition: Callable[[dict[int, list[Frame]]], bool]
) -> dict[int, list[Frame]]:
    """Sample the ranks' stacks until `condition` holds of them."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        stacks = await sample(session)
        if condition(stacks):
            return stacks
        assert time.monotonic() < deadline, stacks
        await session.wait_until(lambda: False, 0.2)


def at(node: Node, file: str, line: int) -> Node:
    """The one node below `node` (at any depth) standing for `file:line`."""
    found = [n for n in walk(node) if n.frame and n.frame.file.endswith(file) and n.frame.line == line]
    assert len(found) == 1, [str(n.frame) for n in walk(node)]
    return found[0]


def walk(node: Node) -> list[Node]:
    """Every node of a tree."""
    return [node, *(n for child in node.children for n in walk(child))]


async def test_a_hang_groups_ranks_0_to_2_in_all_reduce_and_rank_3_asleep() -> None:
    script = SCRIPTS / "stacks_hang.py"
    async with running_session(script, nproc=4, link_timeout=TIMEOUT) as session:
        await sampled_until(
            session,
            lambda stacks: (
                all(stacks[i][-1].func == "all_reduce" for i in range(3))
                and stacks[3][-1].line == marked(script, "sleep")
            ),
        )
        root = await merged(session)
        assert root.ranks == {0, 1, 2, 3}
        waiting = at(root, "stacks_hang.py", marked(script, "hang"))
        sleeping = at(root, "stacks_hang.py", marked(script, "sleep"))
        assert waiting.ranks == {0, 1, 2} and not waiting.odd
        assert sleeping.ranks == {3} and sleeping.odd and sleeping.stops == (Stop(frozenset({3})),)
        (leaf,) = [n for n in walk(waiting) if n.stops]
        assert leaf.frame is not None and leaf.frame.func == "all_reduce", render(root)
        assert leaf.stops == (Stop(frozenset({0, 1, 2}), "#3 all_reduce [3] float32"),), render(root)
        lines = render(await merged(session))
        assert lines[0] == "ranks 0-3: 2 different stacks", lines
        assert any(
            f"≠ main (tests/scripts/stacks_hang.py:{marked(script, 'sleep')}) [rank 3]" in line
            for line in lines
        )
        assert lines[-2].startswith("│  all_reduce (torch/distributed/distributed_c10d.py:"), lines
        assert lines[-2].endswith("[ranks 0-2] · #3 all_reduce [3] float32"), lines
        unfolded = render(await merged(session, frozenset({0, 1, 2}), collapse=False))  # :stacks --all 0-2
        assert unfolded[0] == "ranks 0-2: one stack" and len(unfolded) >= len(lines) - 2


async def test_paused_asleep_exited_and_gil_bound_ranks_each_have_a_stack() -> None:
    script = SCRIPTS / "stacks_mixed.py"
    async with running_session(script, nproc=4, link_timeout=TIMEOUT) as session:
        ranks = session.ranks
        ok = await session.wait_until(lambda: ranks[0].state.at_prompt and not ranks[2].state.alive, TIMEOUT)
        assert ok, [rank.state for rank in ranks]
        stacks = await sampled_until(
            session, lambda stacks: stacks[3][-1].line == marked(script, "hog") and len(stacks[1]) > 1
        )
        name = str(script)
        assert stacks[0] == [Frame(name, marked(script, "breakpoint"), "<module>")]
        assert stacks[1][-1] == Frame(name, marked(script, "nap"), "nap")
        assert [frame.func for frame in stacks[2]] == ["<exited 0>"]
        assert stacks[3][-2:] == [
            Frame(name, marked(script, "hog_call"), "<module>"),
            Frame(name, marked(script, "hog"), "hog"),
        ]
        started = time.monotonic()
        lines = render(await merged(session))
        assert time.monotonic() - started < 4, "the GIL-bound rank was asked for its collectives"
        assert lines[0] == "ranks 0-3: 4 different stacks", lines
        assert any("<exited 0> [rank 2]" in line for line in lines), lines
