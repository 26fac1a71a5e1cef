"""Wrap mode across a launcher's restarts: a rank is the process on its live link, not a pid from an
earlier attempt; a process ddptui refuses runs on undebugged, and ddptui says so."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
from conftest import SCRIPTS, Runner, rank_lines, summary, until
from test_wrap import TORCHRUN, alive, free_port, wrapped

from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp

SEPARATOR = "── attempt 2 (torchrun restart 1) ──"


def restarting_job() -> tuple[str, ...]:
    """torchrun with one restart, on `restarts.py`: its first attempt fails in rank 1."""
    port = str(free_port())
    options = ("--nproc-per-node", "2", "--max-restarts", "1", "--master-port", port)
    return (TORCHRUN, *options, str(SCRIPTS / "restarts.py"))


def test_ranks_restarted_by_torchrun_are_debugged_again(ddptui: Runner) -> None:
    result = wrapped(ddptui, "c\np attempt\nc\n", *restarting_job())
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "already is" not in out and "refused" not in out, out
    for rank in (0, 1):
        lines = rank_lines(out, rank)
        assert SEPARATOR in lines, out
        after = lines[lines.index(SEPARATOR) :]
        assert "-> value = torch.tensor([float(rank + 10 * attempt)])" in after
        assert f"rank {rank} attempt 2 sum 41.0" in after
    assert "RuntimeError: the first attempt fails in rank 1" in rank_lines(out, 1)
    assert out.split("(ddptui) p attempt\n")[1].splitlines()[0] == "[ranks 0-1] 2"
    tail = out[out.rindex("rank 0: ") :].splitlines()
    assert tail[:4] == [
        "rank 0: exited 0 (attempt 2)",
        "  attempt 1: exited 0",
        "rank 1: exited 0 (attempt 2)",
        "  attempt 1: crashed RuntimeError: the first attempt fails in rank 1 (tests/scripts/restarts.py:15)",
    ], out
    assert summary(out) == {0: "exited 0 (attempt 2)", 1: "exited 0 (attempt 2)"}
    assert "launcher: exited 0" in out


def test_a_second_process_claiming_a_live_rank_runs_undebugged(ddptui: Runner, tmp_path: Path) -> None:
    result = wrapped(ddptui, "c\n", sys.executable, str(SCRIPTS / "wrap_twice.py"), str(tmp_path))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    first, second = ((tmp_path / name).read_text() for name in ("first", "second"))
    refused = (
        f"ddptui: rank 0 (pid {second}) refused: rank 0 is pid {first}, which is still running; "
        "it runs undebugged"
    )
    assert out.count(refused) == 1, out
    assert "[launcher] the second worker ran to its end" in out.splitlines()
    assert "the first worker ran to its end" in rank_lines(out, 0)
    assert summary(out) == {0: "exited 0"}
    assert "launcher: exited 0" in out


async def test_the_pane_goes_on_under_a_line_that_names_the_attempt(tmp_path: Path) -> None:
    command = restarting_job()
    spec = LaunchSpec(target=TORCHRUN, nproc=0, command=command, stall_timeout=5)
    app = DdptuiApp(Session(spec))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(app.session.ranks) == 2, timeout=60)
        ranks = app.session.ranks
        crashed = ranks[1]
        await until(pilot, lambda: crashed.state.phase is Phase.PAUSED and crashed.state.post_mortem, 60)
        await until(pilot, lambda: ranks[0].state.exit_code == 0, timeout=60)
        await pilot.press("f5")  # `c`: rank 1 leaves its post-mortem, and torchrun restarts both

        def prompts() -> bool:
            texts = [app.pane(r).terminal.tail_text(500) for r in (0, 1)]
            paused = all(r.attempt == 2 and r.state.phase is Phase.PAUSED for r in ranks)
            return paused and all(f"(Pdb r{r})" in text.split(SEPARATOR)[-1] for r, text in enumerate(texts))

        await until(pilot, prompts, timeout=90)
        for index in (0, 1):
            pane = app.pane(index)
            text = pane.terminal.tail_text(500)
            assert SEPARATOR in text
            assert str(pane.border_title).startswith(f"rank {index} · attempt 2 · paused at ")
        assert "RuntimeError: the first attempt fails in rank 1" in app.pane(1).terminal.tail_text(500)
        await pilot.press("f2", *"p attempt * 100", "enter")
        await until(pilot, lambda: all("200" in app.pane(r).terminal.text().split() for r in (0, 1)))
        workers = [psutil.Process(r.identity.pid) for r in ranks if r.identity is not None]
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, timeout=15)
    assert not any(alive(w) for w in workers)
