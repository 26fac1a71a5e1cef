"""How failures are reported in batch mode: fatal signals, hints, hostile text, floods."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from conftest import SCRIPTS, Runner, rank_lines, summary

RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_a_fatal_signal_is_placed_at_the_users_line(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "segfault.py", "c\n", nproc=1)
    assert result.returncode == 128 + 11
    assert summary(result.stdout) == {0: "killed by SIGSEGV at tests/scripts/segfault.py:9 (in string_at)"}
    assert "Fatal Python error: Segmentation fault" in rank_lines(result.stdout, 0)
    assert result.stderr == (
        "ddptui: rank 0 killed by SIGSEGV at tests/scripts/segfault.py:9 (in string_at) "
        "before its first prompt\n"
    )


def test_a_well_known_failure_gets_a_hint(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "hint_nccl.py", "p 1\n", nproc=2)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    crash = lines.index(
        "rank 0: crashed RuntimeError: Distributed package doesn't have NCCL built in "
        "(tests/scripts/hint_nccl.py:5) (ended by ddptui)"
    )
    assert lines[crash + 1] == '  hint: no NCCL in this torch: use init_process_group(backend="gloo") on CPU'
    # post-mortem opens at the user's line, not inside torch
    assert '-> dist.init_process_group("nccl")' in rank_lines(result.stdout, 0)


def test_escape_sequences_from_a_rank_never_reach_the_terminal(ddptui: Runner, tmp_path: Path) -> None:
    script = tmp_path / "evil\x1b]0;name\x07\x9b.py"
    shutil.copy(SCRIPTS / "hostile_crash.py", script)
    result = ddptui.batch(script, ":state\nc\n", nproc=1)
    assert not RAW_CONTROLS.search(result.stdout + result.stderr), repr(result.stdout)
    state = summary(result.stdout)[0]
    assert state.startswith("crashed RuntimeError: \\x1b]52;c;ZXZpbA==\\x07 \\x1b]0;owned\\x07 \\x1b[31mred")
    assert "evil\\x1b]0;name\\x07\\x9b.py" in result.stdout
    assert "[/] [bold]x[@click=quit]" in state


def test_a_flood_is_printed_or_accounted_for(ddptui: Runner) -> None:
    lines = 500_000  # 50 MB of output between two prompts
    result = ddptui.batch(SCRIPTS / "flood.py", "c\nc\n", nproc=1, timeout=240)
    out = rank_lines(result.stdout, 0)
    numbered = [int(line.split()[1]) for line in out if line.startswith("line ")]
    assert numbered and numbered[-1] == lines - 1
    assert numbered == list(range(numbered[0], lines)), "what is shown is one unbroken tail"
    (gap,) = [line for line in out if "not shown" in line]
    assert re.fullmatch(
        r"\.\.\. \d+\.\d MiB not shown \(the rank printed .*--log-dir keeps every byte\)", gap
    )
    missing = float(gap.split()[1]) * 1048576
    assert abs(missing - numbered[0] * 102) < 0.06 * 1048576, (missing, numbered[0])  # 100 chars + \r\n
    assert result.returncode == 0


def test_a_dataloader_workers_error_is_the_one_named(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "dataloader_crash.py", "c\n", nproc=2, stall=3)
    assert result.returncode == 1
    states = summary(result.stdout)
    assert states[1] == (
        "crashed ValueError: bad sample 5 (in DataLoader worker process 0) "
        "(tests/scripts/dataloader_crash.py:17)  ← root cause"
    ), result.stdout
    assert states[0].endswith("(consequence of rank 1)"), result.stdout


def test_a_rank_waiting_for_a_crashed_peer_is_its_consequence(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "crash_before_reduce.py", "p 1\n", nproc=2)
    states = summary(result.stdout)
    assert states[1].endswith("  ← root cause"), result.stdout
    assert states[0] == (
        "waiting at tests/scripts/crash_before_reduce.py:11 in all_reduce (ended by ddptui)"
        "  (consequence of rank 1)"
    ), result.stdout


def test_a_rank_waiting_for_a_peer_that_exited_early_is_its_consequence(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "exits_before_reduce.py", "p 1\n", nproc=2)
    assert "early exit: rank 1 exited 0, but rank 0 waits in" in result.stdout, result.stdout
    states = summary(result.stdout)
    assert states[1] == "exited 0  ← root cause", result.stdout
    assert states[0] == (
        "waiting at tests/scripts/exits_before_reduce.py:22 in all_reduce (ended by ddptui)"
        "  (consequence of rank 1)"
    ), result.stdout
