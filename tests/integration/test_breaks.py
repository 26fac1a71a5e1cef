"""Breakpoints from the command line (`--break`, `--stop-at-start`), `:breaks` and `:skip`, on real
ranks under real ptys: plain Python, and real gloo jobs started by ddptui, torchrun and `listen`."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SCRIPTS, Runner, rank_lines, summary
from test_listen import ALONE, Listener, in_job

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
NAN = SCRIPTS / "nan_rank2.py"
LOSS_LINE = next(i for i, line in enumerate(NAN.read_text().splitlines(), 1) if "# the loss line" in line)
LOOP = "tests/scripts/loop_breakpoints.py"


def answer(out: str, command: str, lines: int = 1) -> list[str]:
    """The first `lines` lines a batch transcript shows after `(ddptui) command`."""
    return out.split(f"(ddptui) {command}\n")[1].splitlines()[:lines]


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_break_stops_every_rank_at_a_line_no_breakpoint_call_is_on(ddptui: Runner) -> None:
    where = f"tests/scripts/nan_rank2.py:{LOSS_LINE}"
    result = ddptui.batch(NAN, "p step, rank\n:breaks\nc\n", "--break", where, nproc=4, stall=5)
    out = result.stdout
    assert answer(out, "p step, rank", 4) == [f"[rank {r}] (0, {r})" for r in range(4)], out
    assert answer(out, ":breaks") == [f"ddptui: [ranks 0-3] 1 {where} (hits 1)"]
    for rank in range(4):  # `c` stops at the same line, one step later, on every rank
        assert rank_lines(out, rank).count("-> loss = out.pow(2).mean()  # the loss line") == 2
    assert summary(out) == {r: f"paused at {where} (ended by ddptui)" for r in range(4)}


def test_a_conditional_break_stops_only_the_ranks_where_it_holds(ddptui: Runner) -> None:
    where = f"tests/scripts/nan_rank2.py:{LOSS_LINE + 1}"
    given = f"{where},loss.isnan().any()"
    result = ddptui.batch(NAN, "p step, rank\n:breaks\n", "--break", given, nproc=4, stall=3)
    out = result.stdout
    assert answer(out, "p step, rank", 2)[1] == "[rank 2] (3, 2)", out  # rank 2's NaN, at step 3
    assert f"ddptui: [ranks 0-3] 1 {where} if loss.isnan().any() (hits 4)" in answer(out, ":breaks", 2)
    states = summary(out)
    assert states[2] == f"paused at {where} (ended by ddptui)"
    assert all(states[r].startswith(f"waiting at {where} in backward") for r in (0, 1, 3)), states


def test_stop_at_start_stops_every_rank_at_its_scripts_first_line(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "n\nn\np rank\nc\n", "--stop-at-start")
    out = result.stdout
    for rank in (0, 1):
        steps = [line for line in rank_lines(out, rank) if line.startswith("-> ")]
        first = SCRIPTS.joinpath("steps.py").read_text().splitlines()[0]
        assert steps[:3] == [f"-> {first}", "-> import os", '-> rank = int(os.environ["RANK"])'], out
    assert answer(out, "p rank") == ["[ranks 0-1] *** NameError: name 'rank' is not defined"]
    assert "-> value += 1" in rank_lines(out, 0)  # `c` went on to the script's own breakpoint()


def test_stop_at_start_in_a_torchrun_job(ddptui: Runner) -> None:
    script = str(SCRIPTS / "wrap_torchrun.py")
    command = [TORCHRUN, "--nproc-per-node", "2", "--master-port", str(free_port()), script]
    result = ddptui.run(
        "--stall-timeout",
        "3",
        "--stop-at-start",
        "--batch",
        "-",
        "--",
        *command,
        stdin="n\np __name__\nc\nc\n",
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    first = (ROOT / script).read_text().splitlines()[0]
    assert f"[ranks 0-1] -> {first}" in out
    assert (
        answer(out, "n", 2)[1]
        == "[ranks 0-1] -> import os  # noqa: F401  (the tests print os.environ at the prompt)"
    )
    assert answer(out, "p __name__") == ["[ranks 0-1] '__main__'"]
    assert summary(out) == {0: "exited 0", 1: "exited 0"}


def test_stop_at_start_in_mp_spawn_workers_stops_at_their_function(ddptui: Runner) -> None:
    script = str(SCRIPTS / "wrap_spawn.py")
    command = [sys.executable, script, str(free_port())]
    result = ddptui.run(
        "--stall-timeout", "3", "--stop-at-start", "--batch", "-", "--", *command, stdin="p rank\nc\nc\n"
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "[ranks 0-1] -> ddp_setup(rank, world_size, port)" in out  # main()'s first line
    assert answer(out, "p rank", 2) == ["[rank 0] 0", "[rank 1] 1"]
    assert summary(out) == {0: "exited 0", 1: "exited 0"}


def test_break_in_ranks_that_dial_in_to_listen(ddptui: Runner) -> None:
    listener = Listener(ddptui, "c\np value\nc\n", "--world-size", "1", "--break", "tests/scripts/steps.py:9")
    export = listener.export()
    assert "DDPTUI_BREAKS=" in export
    rank = in_job(ddptui, export, sys.executable, str(SCRIPTS / "steps.py"), env=ALONE)
    status, out = listener.finish()
    rank.communicate(timeout=30)
    assert status == 0, out
    assert answer(out, "c", 2)[1] == "[rank 0] -> value += 2", out  # past breakpoint(), at the --break
    assert answer(out, "p value") == ["[rank 0] 1"]
    assert summary(out) == {0: "exited 0"}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("tests/scripts/nope.py:3", "no such file: tests/scripts/nope.py"),
        ("tests/scripts/steps.py:99", "line 99 is out of range ({path} has 10 lines)"),
        ("tests/scripts/steps.py:2", "line 2 of {path} holds no code (blank, a comment, or a docstring)"),
        ("tests/scripts/steps.py:8,value +", "the condition is not a Python expression (invalid syntax)"),
        ("tests/scripts/steps.py:8,", "no condition after the comma"),
        ("tests/scripts/steps.py:train", "no function train is defined in {path}"),
        ("nomodule.train", "no module nomodule beside the script or on the Python path"),
    ],
)
def test_a_bad_break_is_one_line_before_any_rank_starts(ddptui: Runner, given: str, message: str) -> None:
    path = SCRIPTS / "steps.py"
    result = ddptui.run("--batch", "-", "--break", given, str(path), stdin="c\n", timeout=30)
    said = f"ddptui: error: --break {given}: {message.format(path=path)}\n"
    assert (result.returncode, result.stderr, result.stdout) == (2, said, "")


def test_a_break_by_function_name_stops_at_its_first_line(ddptui: Runner) -> None:
    options = ("--break", "nan_rank2.main", "--break", "tests/scripts/nan_rank2.py:main")
    result = ddptui.batch(NAN, ":breaks\n", *options, nproc=1)
    out = result.stdout
    main = next(i for i, line in enumerate(NAN.read_text().splitlines(), 1) if line.startswith("def main"))
    assert rank_lines(out, 0)[2:4] == [
        f"> {NAN}({main + 1})main()",
        '-> dist.init_process_group("gloo", init_method="env://")',
    ], out
    assert answer(out, ":breaks", 2) == [
        f"ddptui: [rank 0] 1 tests/scripts/nan_rank2.py:{main} (hits 1)",  # pdb counts the first that stops
        f"ddptui: [rank 0] 2 tests/scripts/nan_rank2.py:{main} (hits 0)",
    ]


def test_breaks_lists_each_ranks_breakpoints_the_same_ones_together(ddptui: Runner) -> None:
    commands = "b 10\n:breaks\n@1 b 11\n:breaks\n"
    result = ddptui.batch(LOOP, commands, "--break", f"{LOOP}:9,step == 3")
    out = result.stdout
    assert answer(out, "b 10") == [f"[ranks 0-1] Breakpoint 2 at {ROOT / LOOP}:10"]
    assert answer(out, ":breaks", 2) == [
        f"ddptui: [ranks 0-1] 1 {LOOP}:9 if step == 3 (hits 0)",
        f"ddptui: [ranks 0-1] 2 {LOOP}:10 (hits 0)",
    ]
    listed = out.split("(ddptui) :breaks\n")[2].splitlines()[:5]
    assert listed == [
        f"ddptui: [rank 0] 1 {LOOP}:9 if step == 3 (hits 0)",
        f"ddptui: [rank 0] 2 {LOOP}:10 (hits 0)",
        f"ddptui: [rank 1] 1 {LOOP}:9 if step == 3 (hits 0)",
        f"ddptui: [rank 1] 2 {LOOP}:10 (hits 0)",
        f"ddptui: [rank 1] 3 {LOOP}:11 (hits 0)",
    ]


def test_a_bare_skip_remembers_the_breakpoint_call_after_a_step(ddptui: Runner) -> None:
    result = ddptui.batch(LOOP, "n\n:skip\nc\np len(done)\n")
    out = result.stdout
    assert answer(out, ":skip") == [
        f"ddptui: breakpoint at {LOOP}:8 stops no more, on any rank (:skip none undoes)"
    ], out
    assert answer(out, "p len(done)") == ["[ranks 0-1] 5"]  # the loop ran on to the breakpoint after it


def test_a_bare_skip_disables_the_break_the_ranks_last_stopped_at(ddptui: Runner) -> None:
    result = ddptui.batch(LOOP, "n\n:skip\n:breaks\n:skip none\n:breaks\n", "--break", f"{LOOP}:6")
    out = result.stdout
    assert answer(out, ":skip") == [
        f"ddptui: breakpoint at {LOOP}:6 stops no more, on any rank (:skip none undoes)"
    ]
    lists = out.split("(ddptui) :breaks\n")
    assert lists[1].splitlines()[0] == f"ddptui: [ranks 0-1] 1 {LOOP}:6 (disabled) (hits 1)"
    assert lists[2].splitlines()[0] == f"ddptui: [ranks 0-1] 1 {LOOP}:6 (hits 1)"


def test_skip_file_line_skips_a_breakpoint_call_not_reached_yet_and_a_break(ddptui: Runner) -> None:
    commands = ":skip loop_breakpoints.py:10\n:skip loop_breakpoints.py:8\nc\n"
    result = ddptui.batch(LOOP, commands, "--break", f"{LOOP}:5")
    out = result.stdout
    assert answer(out, ":skip loop_breakpoints.py:10") == [
        "ddptui: breakpoint at loop_breakpoints.py:10 stops no more, on any rank (:skip none undoes)"
    ]
    for rank in (0, 1):  # neither breakpoint() stopped: the loop ran to the end
        assert f"rank {rank} ran 5 steps" in rank_lines(out, rank)
    assert result.returncode == 0 and summary(out) == {0: "exited 0", 1: "exited 0"}
