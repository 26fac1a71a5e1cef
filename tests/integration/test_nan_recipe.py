"""The guide's recipe on a script left as it is: `--break` at the line after the loss and `:until`
name the rank whose loss went NaN first (`tests/scripts/nan_rank2.py`: rank 2, step 3)."""

from __future__ import annotations

from conftest import SCRIPTS, Runner, rank_lines, summary

NAN = SCRIPTS / "nan_rank2.py"


def after_loss() -> int:
    """The line after the one marked `# the loss line`: `loss` is defined there."""
    lines = NAN.read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if text.rstrip().endswith("# the loss line")) + 1


def test_break_and_until_name_rank_2_at_step_3_without_editing_the_script(ddptui: Runner) -> None:
    assert "breakpoint()" not in NAN.read_text()
    line = after_loss()
    result = ddptui.batch(
        NAN, ":until bool(loss.isnan())\np step\n", "--break", f"{NAN}:{line}", nproc=4, stall=5
    )
    said = [text for text in result.stdout.splitlines() if text.startswith("ddptui: ")]
    assert said[0] == (
        f"ddptui: bool(loss.isnan()) first true on rank 2 at tests/scripts/nan_rank2.py:{line} (stop 3); "
        "ranks 0-1,3 false"
    ), result.stdout + result.stderr
    assert all(rank_lines(result.stdout, rank)[-1] == "3" for rank in range(4)), result.stdout
    assert summary(result.stdout) == {
        rank: f"paused at tests/scripts/nan_rank2.py:{line} (ended by ddptui)" for rank in range(4)
    }
