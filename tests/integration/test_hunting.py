"""`:until EXPR` and `:until-diverge EXPR` in batch mode on real 4-rank gloo jobs: the rank whose loss
went NaN first, the stop where a DDP replica drifts, the bound, an EXPR that raises, ranks that end,
Ctrl-C, and bad lines."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import SCRIPTS, Runner, rank_lines, summary

NAN = SCRIPTS / "until_nan.py"
DRIFT = SCRIPTS / "drift.py"
LOOP = SCRIPTS / "slow_loop.py"


def line_of(script: Path, tag: str) -> int:
    """The line a breakpoint() marked `# @tag` stops at (the one after it)."""
    for number, text in enumerate(script.read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# @{tag}"):
            return number + 1
    raise LookupError(tag)


def said(stdout: str) -> list[str]:
    """ddptui's own lines of a transcript, without their `ddptui: `."""
    return [line.removeprefix("ddptui: ") for line in stdout.splitlines() if line.startswith("ddptui: ")]


def test_until_names_the_rank_whose_loss_went_nan_first(ddptui: Runner) -> None:
    result = ddptui.batch(NAN, ":until bool(loss.isnan())\np step\n", nproc=4)
    at = f"tests/scripts/until_nan.py:{line_of(NAN, 'step')}"
    assert said(result.stdout)[0] == (
        f"bool(loss.isnan()) first true on rank 2 at {at} (stop 3); ranks 0-1,3 false"
    ), result.stdout + result.stderr
    for rank in range(4):  # every rank stayed paused there, at step 3
        assert rank_lines(result.stdout, rank)[-1] == "3", result.stdout
        assert summary(result.stdout)[rank] == f"paused at {at} (ended by ddptui)"
    # each stop's answers are printed once, as a typed `c`'s would be
    assert result.stdout.count("[ranks 0-3] -> loss.backward()") == 4, result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_until_stops_at_its_bound_at_an_expression_that_raises_and_when_the_ranks_end(
    ddptui: Runner,
) -> None:
    lines = [
        ":until --max-stops 1 bool(loss > 1e9)",  # step 1
        ":until bool(nope)",  # raises everywhere: step 2
        ":until bool(loss > 1e9)",  # --max-stops 2 from the command line: step 4
        ":until bool(loss.isnan()) if rank != 1 else nope",  # true at once on rank 2; rank 1 raises
        ":until --max-stops 50 bool(step > 100)",  # the ranks end after step 7
    ]
    result = ddptui.batch(NAN, "\n".join(lines) + "\n", "--max-stops", "2", nproc=4)
    at = f"tests/scripts/until_nan.py:{line_of(NAN, 'step')}"
    assert said(result.stdout) == [
        f":until bool(loss > 1e9) reached --max-stops 1: not found in 1 stop; ranks 0-3 paused at {at}",
        ":until bool(nope) stopped at stop 1: bool(nope) raised on every rank",
        "bool(nope) raised on ranks 0-3 (from stop 0): NameError: name 'nope' is not defined",
        f":until bool(loss > 1e9) reached --max-stops 2: not found in 2 stops; ranks 0-3 paused at {at}",
        f"bool(loss.isnan()) if rank != 1 else nope first true on rank 2 at {at} (stop 0: before any "
        "continue); ranks 0,3 false; rank 1 raised",
        "bool(loss.isnan()) if rank != 1 else nope raised on rank 1 (from stop 0): NameError: name 'nope' "
        "is not defined",
        ":until bool(step > 100) stopped at stop 4: ranks 0-3 exited 0",
    ], result.stdout + result.stderr
    assert result.returncode == 0
    assert summary(result.stdout) == {rank: "exited 0" for rank in range(4)}


def test_until_diverge_finds_the_stop_where_a_replica_drifts(ddptui: Runner) -> None:
    lines = [":until-diverge weight.sum().item()", "p step", ":until-diverge --tol 1e-2 weight.sum().item()"]
    result = ddptui.batch(DRIFT, "\n".join(lines) + "\n", nproc=4)
    at = f"tests/scripts/drift.py:{line_of(DRIFT, 'step')}"
    found, *table, within = said(result.stdout)
    assert found.startswith(f"at stop 4 ({at}), weight.sum().item() differs: ranks 0-2 = "), found
    assert "; rank 3 = " in found
    assert table[0] == "2 distinct values", table
    assert table[1].startswith("  ranks 0-2 │ ") and table[2].startswith("≠ rank 3    │ "), table
    assert "(ddptui) p step\n[ranks 0-3] 4\n" in result.stdout  # every rank stayed paused at step 4
    # within --tol the drift (1e-3 per element) is no divergence: the ranks run to their end
    assert within == ":until-diverge weight.sum().item() stopped at stop 4: ranks 0-3 exited 0", result.stdout


def test_until_stops_when_a_rank_crashes_and_names_it(ddptui: Runner) -> None:
    result = ddptui.run("--nproc-per-node", "2", "--batch", "-", str(LOOP), "2", stdin=":until step > 100\n")
    crash = "ValueError: rank 1 gives up at step 2 (tests/scripts/slow_loop.py:15)"
    assert said(result.stdout) == [
        f":until step > 100 stopped at stop 3: rank 1 crashed {crash}, in post-mortem; "
        f"rank 0 paused at tests/scripts/slow_loop.py:{line_of(LOOP, 'step')}"
    ], result.stdout


def read_until(proc: subprocess.Popen[str], text: str, timeout: float) -> str:
    """What ddptui printed until a line holding `text` (fails after `timeout` seconds)."""
    assert proc.stdout is not None
    seen, deadline = "", time.monotonic() + timeout
    fd = proc.stdout.fileno()
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} not printed in time: {seen}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536).decode()
            assert chunk, f"ddptui ended before printing {text!r}: {seen}"
            seen += chunk
    return seen


def test_ctrl_c_stops_a_running_until_and_leaves_every_rank_paused(ddptui: Runner) -> None:
    proc = ddptui.popen("--nproc-per-node", "2", "--batch", "-", str(LOOP))
    assert proc.stdin is not None
    try:
        proc.stdin.write(":until bool(step > 10**6)\n")
        proc.stdin.flush()
        read_until(proc, "(ddptui) :until bool(step > 10**6)", 60)  # said as its first `c` goes out
        proc.send_signal(signal.SIGINT)
        out = read_until(proc, "stopped by the user after", 60)
        rest, err = proc.communicate("p step\n", timeout=60)
    finally:
        proc.kill()
    out += rest
    at = f"tests/scripts/slow_loop.py:{line_of(LOOP, 'step')}"
    stopped = next(line for line in said(out) if "stopped by the user" in line)
    assert stopped.startswith(":until bool(step > 10**6) stopped by the user after "), out
    assert stopped.endswith(f"; ranks 0-1 paused at {at}"), stopped
    stops = int(stopped.split(" after ")[1].split()[0])
    assert stops >= 1
    assert [rank_lines(out, rank)[-1] for rank in (0, 1)] == [str(stops)] * 2, out
    assert "Traceback" not in out + err


UNTIL = "usage: :until [--max-stops N] EXPR"
DIVERGE = "usage: :until-diverge [--max-stops N] [--tol X] EXPR"


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (":until", "usage: :until [--max-stops N] EXPR (no EXPR)"),
        (
            ":until --max-stops 0 step",
            f"{UNTIL} (argument --max-stops: needs a whole number of stops above 0, not '0')",
        ),
        (
            ":until --max-stops x step",
            f"{UNTIL} (argument --max-stops: needs a whole number of stops above 0, not 'x')",
        ),
        (":until --tol 1 step", "usage: :until [--max-stops N] EXPR (unrecognized arguments: --tol 1)"),
        (
            ":until-diverge --tol abc step",
            f"{DIVERGE} (argument --tol: invalid float value: 'abc')",
        ),
        (":until step >", "not run: step > is not a Python expression (invalid syntax)"),
    ],
)
def test_a_bad_line_says_why_in_one_line_and_runs_nothing(ddptui: Runner, line: str, error: str) -> None:
    result = ddptui.batch(LOOP, f"{line}\np step\n")
    assert said(result.stdout) == [error], result.stdout
    assert [rank_lines(result.stdout, rank)[-1] for rank in (0, 1)] == ["0", "0"]


def test_a_bad_max_stops_option_is_one_line_and_status_2(ddptui: Runner) -> None:
    result = ddptui.run("--max-stops", "0", "--batch", "-", str(LOOP))
    assert result.returncode == 2
    assert result.stderr == "ddptui: error: --max-stops must be 1 or more stops, not 0\n"
    assert result.stdout == ""


def test_a_first_continue_that_meets_no_breakpoint_says_where_to_set_one(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", ":until value > 100\n")
    assert said(result.stdout) == [
        ":until value > 100 stopped at stop 1: ranks 0-1 exited 0 (EXPR is looked at where a c stops, "
        "and the first c met no breakpoint: set one on the way, --break FILE:LINE or b FILE:LINE)"
    ], result.stdout
