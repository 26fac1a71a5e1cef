"""Batch mode against real ranks under real ptys (plain Python and real gloo collectives)."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from conftest import EXAMPLES, ROOT, SCRIPTS, Runner, rank_lines, summary


def test_lockstep_steps_ranks_over_ddp_backward(ddptui: Runner) -> None:
    result = ddptui.batch(EXAMPLES / "train_ddp.py", "n\nn\nn\np rank\np float(loss)\nc\n")
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        lines = rank_lines(result.stdout, rank)
        assert "-> out = model(x)" in lines[1]
        steps = [line for line in lines if line.startswith("-> ")]
        # three lockstep `n`: the last one stepped over loss.backward(), the gradient all_reduce
        assert [s.split()[1] for s in steps] == ["out", "loss", "loss.backward()", "optimizer.step()"]
        assert str(rank) in lines
        assert lines[-1].startswith(f"rank {rank} step 2 loss ")
        assert not any(line.strip() in ("n", "p rank") for line in lines), "pdb's echo must be removed"
    losses = {rank: rank_lines(result.stdout, rank)[-4] for rank in (0, 1)}
    assert losses[0] != losses[1], "each rank answers with its own value"
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_four_ranks_answer_in_rank_order(ddptui: Runner) -> None:
    result = ddptui.batch(EXAMPLES / "train_ddp.py", "n\nn\np loss\nc\n", nproc=4, stall=5)
    assert result.returncode == 0, result.stdout + result.stderr
    after_p = result.stdout.split("(ddptui) p loss\n")[1].splitlines()[:4]
    assert [line.split("]")[0] for line in after_p] == [f"[rank {r}" for r in range(4)]
    assert all("tensor(" in line for line in after_p)
    assert summary(result.stdout) == {r: "exited 0" for r in range(4)}


def test_rank0_only_set_trace_reports_others_waiting(ddptui: Runner) -> None:
    result = ddptui.batch(EXAMPLES / "rank0_set_trace.py", "p rank\nn\nc\n", stall=2)
    assert result.returncode == 0, result.stdout + result.stderr
    unsent = "not sent to rank 1, not at a prompt (waiting at examples/rank0_set_trace.py:17 in all_reduce)"
    assert f"(ddptui) p rank\nddptui: p rank {unsent}\n" in result.stdout
    # said before the answers: `n` released rank 1 from the all_reduce, and what it printed then
    # comes after the note that says it was not sent the command
    assert f"(ddptui) n\nddptui: n {unsent}\n[rank 0] > " in result.stdout, result.stdout
    assert rank_lines(result.stdout, 0)[2] == "0"
    assert "rank 1 sum 3.0" in rank_lines(result.stdout, 1)
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_crash_opens_post_mortem_and_names_innermost_error(ddptui: Runner) -> None:
    result = ddptui.batch(EXAMPLES / "name_error.py", "@1 p rank\n@1 w\n", stall=2)
    assert result.returncode == 1
    crashed = rank_lines(result.stdout, 1)
    assert "NameError: name 'c' is not defined" in crashed
    answers = result.stdout.split("(ddptui) @1 p rank\n")[1].split("(ddptui)")[0].splitlines()
    assert "[rank 1] 1" in answers  # (a verdict line found meanwhile may come first)
    where = "\n".join(rank_lines(result.stdout.split("(ddptui) @1 w\n")[1], 1))
    assert "name_error.py(14)<module>()" in where and "runpy" not in where and "ddptui" not in where
    states = summary(result.stdout)
    crash = "crashed NameError: name 'c' is not defined (examples/name_error.py:14)"
    assert states[1] == f"{crash} (ended by ddptui)  ← root cause"
    assert states[0] == (  # waiting in the all_reduce rank 1 never reached
        "waiting at examples/name_error.py:15 in all_reduce (ended by ddptui)  (consequence of rank 1)"
    )


def test_subset_targeting_and_default_targets(ddptui: Runner) -> None:
    commands = "@1 p value\n:ranks 0\np value\n:ranks all\np value\n:ranks 5\nc\n"
    result = ddptui.batch(SCRIPTS / "steps.py", commands, nproc=3)
    out = result.stdout
    first = out.split("(ddptui) @1 p value\n")[1].split("(ddptui)")[0]
    assert first.strip() == "[rank 1] 10", out
    second = out.split("(ddptui) p value\n")[1].split("(ddptui)")[0]
    assert second.strip() == "[rank 0] 0"
    third = out.split("(ddptui) p value\n")[2].split("(ddptui)")[0]
    assert third.strip().splitlines() == ["[rank 0] 0", "[rank 1] 10", "[rank 2] 20"], out
    assert "ddptui: no such ranks: 5 (ranks are 0-2)" in out
    assert result.returncode == 0, out
    assert summary(out) == {0: "exited 0", 1: "exited 0", 2: "exited 0"}


def test_empty_lines_are_never_sent(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "n\n\n   \np value\nc\n", nproc=2)
    assert result.stdout.count("(ddptui) ") == 3
    assert rank_lines(result.stdout, 1)[-2] == "11", result.stdout
    assert result.returncode == 0


def test_every_breakpoint_flavour_stops_with_rank_prompt(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "pdb_class.py", "p rank\nc\np first\nc\n", nproc=2)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        lines = rank_lines(result.stdout, rank)
        assert str(rank) in lines and "'after Pdb()'" in lines


def test_torch_distributed_breakpoint_stops_at_caller(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "dist_breakpoint.py", "p here\nc\n", stall=2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "'caller frame'" in rank_lines(result.stdout, 0)
    assert "Type 'up'" not in result.stdout
    assert "rank 1 released" in rank_lines(result.stdout, 1)


def test_hostile_bytes_do_not_break_the_session(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "hostile.py", "p marker\nc\n", nproc=2)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        assert "'still alive'" in rank_lines(result.stdout, rank)
    assert "Traceback" not in result.stderr


def test_rank_dying_before_first_prompt(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "dies_early.py", "c\n", nproc=2)
    assert result.returncode == 3
    assert result.stderr.strip() == "ddptui: rank 1 exited 3 before its first prompt: rank 1 giving up"
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 3"}


def test_module_mode_and_missing_module(ddptui: Runner) -> None:
    result = ddptui.run("--nproc-per-node", "1", "--batch", "-", "-m", "no_such_module_xyz", stdin="c\n")
    assert result.returncode == 1
    assert (
        result.stderr
        == "ddptui: rank 0 crashed before its first prompt: ImportError: No module named no_such_module_xyz\n"
    )
    assert "Traceback" not in result.stderr


def test_log_dir_keeps_each_rank_output_and_the_states(ddptui: Runner, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = ddptui.batch(SCRIPTS / "steps.py", "p value\nc\n", "--log-dir", str(logs))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in logs.iterdir()) == ["rank-0.log", "rank-1.log", "session.log"]
    assert b"(Pdb r1) p value\r\n10\r\n" in (logs / "rank-1.log").read_bytes()
    events = (logs / "session.log").read_text()
    assert "rank 0: paused at tests/scripts/steps.py:8" in events and "rank 1: exited 0" in events


def test_ipdb_set_trace_stops_in_rank_pdb(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "ipdb_stop.py", "p rank\np after\nn\np after\nc\n")
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        lines = rank_lines(result.stdout, rank)
        assert lines[1] == '-> after = "ipdb stop"' and str(rank) in lines and "'ipdb stop'" in lines


def test_stepping_past_the_last_line_lets_the_rank_finish(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "n\nn\nn\nn\nn\n", nproc=2)
    assert result.returncode == 0, result.stdout
    assert "ddptui/rank" not in result.stdout and "dataclasses.py" not in result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_batch_never_ends_a_rank_that_makes_progress(ddptui: Runner) -> None:
    # 8 s of computing is 16 stall timeouts: still running, never "waiting", never ended
    result = ddptui.run("--stall-timeout", "0.5", "--batch", "-", str(SCRIPTS / "computes.py"), "8", stdin="")
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}
    assert "rank 1 sum 2.0" in rank_lines(result.stdout, 1)


def test_batch_waits_for_ranks_still_joining_the_rendezvous(ddptui: Runner) -> None:
    # rank 1 waits 8 s for rank 0's store, so torch's connect backoff has it sleep for seconds
    # after the store opens: the whole job idle far longer than the stall timeout, yet joining
    result = ddptui.run(
        "--stall-timeout", "0.3", "--batch", "-", str(SCRIPTS / "late_master.py"), "8", stdin=""
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}
    assert "rank 1 sum 2.0" in rank_lines(result.stdout, 1)[0]


def test_timeout_ends_a_long_batch_run_and_says_so(ddptui: Runner) -> None:
    started = time.monotonic()
    result = ddptui.run("--timeout", "3", "--batch", "-", str(SCRIPTS / "computes.py"), "600", stdin="")
    assert time.monotonic() - started < 30
    assert result.returncode == 124
    assert "ddptui: --timeout 3 s reached: ending every rank" in result.stdout
    assert summary(result.stdout)[0] == "running (ended by ddptui)"


def test_skip_lets_a_loop_with_a_breakpoint_run_to_its_end(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "loop_breakpoints.py", ":skip\nc\nc\n")
    assert (
        "ddptui: breakpoint at tests/scripts/loop_breakpoints.py:8 stops no more, on any rank "
        "(:skip none undoes)" in result.stdout
    )
    for rank in (0, 1):  # the loop ran its 5 steps, then the breakpoint after it stopped as usual
        assert f"rank {rank} ran 5 steps" in rank_lines(result.stdout, rank)
        assert '-> print(f"rank {rank} ran {len(done)} steps")' in rank_lines(result.stdout, rank)
    assert result.returncode == 0 and summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_skip_all_and_skip_none(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "loop_breakpoints.py", ":skip all\nc\n")
    assert "ddptui: no breakpoint() stops any more, on any rank (:skip none undoes)" in result.stdout
    assert result.returncode == 0 and "rank 1 ran 5 steps" in rank_lines(result.stdout, 1)
    result = ddptui.batch(SCRIPTS / "loop_breakpoints.py", ":skip\n:skip none\nc\np step\n")
    assert "ddptui: every breakpoint stops again" in result.stdout
    answer = result.stdout.split("(ddptui) p step\n")[1].splitlines()[0]
    assert answer == "[ranks 0-1] 1"  # stopped again at the next step


def test_pythonbreakpoint_0_disables_breakpoints(ddptui: Runner) -> None:
    ddptui.env["PYTHONBREAKPOINT"] = "0"
    result = ddptui.batch(SCRIPTS / "loop_breakpoints.py", "")
    assert result.returncode == 0 and "rank 0 ran 5 steps" in rank_lines(result.stdout, 0)


def test_the_demo_does_what_its_docstring_suggests(ddptui: Runner) -> None:
    commands = ["n", "n", "n", "p loss", "p model.module[0].weight.grad.norm()", "c"]
    docstring = (ROOT / "src/ddptui/demo/train.py").read_text().split('"""')[1]
    assert all(f"`{command}`" in docstring for command in set(commands))
    result = ddptui.run("--demo", "--batch", "-", stdin="\n".join(commands) + "\n", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    norms = result.stdout.split("(ddptui) p model.module[0].weight.grad.norm()\n")[1].splitlines()
    assert norms[0].startswith("[ranks 0-3] tensor(")  # one answer: equal on every rank
    assert "Error" not in result.stdout


def test_the_demo_places_a_waiting_rank_in_its_own_code(ddptui: Runner) -> None:
    result = ddptui.run("--demo", "--batch", "-", stdin="n\nn\n@1 n\n:state\n:quit\n", timeout=120)
    demo = (ROOT / "src/ddptui/demo/train.py").read_text().splitlines()
    backward = next(i for i, line in enumerate(demo, 1) if line.strip() == "loss.backward()")
    assert f"rank 1 waiting at src/ddptui/demo/train.py:{backward} in backward" in result.stdout


def test_identical_answers_are_printed_once_unless_no_collapse(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "p 6 * 7\np value\nc\n", nproc=3)
    assert result.stdout.split("(ddptui) p 6 * 7\n")[1].splitlines()[0] == "[ranks 0-2] 42"
    values = result.stdout.split("(ddptui) p value\n")[1].splitlines()[:3]
    assert values == ["[rank 0] 0", "[rank 1] 10", "[rank 2] 20"]
    result = ddptui.batch(SCRIPTS / "steps.py", "p 6 * 7\nc\n", "--no-collapse", nproc=3)
    answers = result.stdout.split("(ddptui) p 6 * 7\n")[1].splitlines()[:3]
    assert answers == ["[rank 0] 42", "[rank 1] 42", "[rank 2] 42"]


def test_waiting_ranks_are_placed_again_after_a_step(ddptui: Runner) -> None:
    # the sleep gives ranks 0 and 2 time to leave the barrier (rank 1 may pause again before they do);
    # --non-stop: the subject is where the stall watch places them, not all-stop (which, on a loaded
    # machine, may interrupt them between the barrier and the all_reduce)
    commands = ":state\n@1 c\n@1 !__import__('time').sleep(1)\n:state\nc\n"
    result = ddptui.batch(SCRIPTS / "dist_breakpoint_rank1.py", commands, "--non-stop", nproc=3, stall=2)
    before = result.stdout.split("(ddptui) :state\n")[1].split("(ddptui)")[0]
    after = result.stdout.split("(ddptui) :state\n")[2].split("(ddptui)")[0]
    assert "rank 0: waiting at tests/scripts/dist_breakpoint_rank1.py:9 in barrier" in before
    assert "rank 0: waiting at tests/scripts/dist_breakpoint_rank1.py:12 in all_reduce" in after, after
    assert "rank 2: waiting at tests/scripts/dist_breakpoint_rank1.py:12 in all_reduce" in after
    assert result.returncode == 0, result.stdout


def test_where_shows_the_users_frames_only_as_the_stack_moves(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "nested.py", "s\nn\nw\nup\nw\nc\n", nproc=1)
    assert result.returncode == 0, result.stdout + result.stderr
    first, after_up = (
        [line for line in rank_lines(part.split("(ddptui)")[0], 0) if line.lstrip(" >").startswith("/")]
        for part in result.stdout.split("(ddptui) w\n")[1:]
    )
    # the launcher's frames (runpy, ddptui) never show; `up` moves the marker, not the stack
    assert [line.split("nested.py")[1] for line in first] == ["(13)<module>()", "(7)scaled()"]
    assert first[1].startswith(">") and after_up[0].startswith(">")
    assert [line.lstrip(" >") for line in after_up] == [line.lstrip(" >") for line in first]


def test_pdb_display_shows_what_changed_at_each_stop(ddptui: Runner) -> None:
    """`display EXPR` is pdb's own watch: each stop where it changed prints it (RankPdb's
    prompt hook must not swallow it)."""
    result = ddptui.batch(SCRIPTS / "steps.py", "display value\nn\nn\n", nproc=2)
    for rank in (0, 1):
        lines = rank_lines(result.stdout, rank)
        start = rank * 10
        assert f"display value: {start + 1}  [old: {start}]" in lines, result.stdout
        assert f"display value: {start + 3}  [old: {start + 1}]" in lines, result.stdout


def test_the_demo_without_a_terminal_runs_as_a_batch(ddptui: Runner) -> None:
    result = ddptui.run("--demo", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "ddptui: no terminal for the app: the demo runs as --batch would\n"
    out = result.stdout
    assert "(ddptui) :compare loss\nddptui: 4 distinct values\n" in out
    assert summary(out) == {rank: "exited 0" for rank in range(4)}


def test_pdb_commands_after_every_rank_ended_are_one_line_not_one_each(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "steps.py", "c\nn\nn\np value\n:state\nn\n")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    after_c = lines[lines.index("(ddptui) c") + 1 :]
    assert after_c[2:4] == [
        "ddptui: 3 pdb commands not sent, every rank had ended: n, n, p value",
        "(ddptui) :state",
    ], result.stdout
    assert "ddptui: 1 pdb command not sent, every rank had ended: n" in after_c
    assert "(ddptui) n" not in after_c and "no live rank" not in result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_batch_ranks_read_plain_lines(ddptui: Runner) -> None:
    """Only ddptui types into a batch run's ranks: their pdb reads plain lines, not through readline."""
    result = ddptui.batch(SCRIPTS / "steps.py", "p __import__('os').environ.get('DDPTUI_PLAIN_INPUT')\nn\n")
    assert "[ranks 0-1] '1'" in result.stdout, result.stdout
    assert summary(result.stdout) == {
        r: "paused at tests/scripts/steps.py:9 (ended by ddptui)" for r in (0, 1)
    }


def test_plain_lines_are_read_from_a_terminal_the_program_left_raw(ddptui: Runner) -> None:
    """readline never minded a raw terminal; plain input cooks it for the prompt and puts the
    program's settings back when the prompt closes (it used to wait forever for a newline)."""
    result = ddptui.batch(SCRIPTS / "raw_terminal.py", "n\np value\nc\n", timeout=60)
    assert "[rank 0] 1\n[rank 1] 11\n" in result.stdout, result.stdout
    assert "[rank 1] rank 1 value 11 raw" in result.stdout, result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_a_pdb_command_longer_than_a_terminal_line_is_refused_not_cut(ddptui: Runner) -> None:
    """Plain lines pass through the terminal's line buffer: 4095 bytes arrive whole, more would be cut."""
    longest, too_long = (f'p len("{"x" * (size - 9)}")' for size in (4095, 4096))
    result = ddptui.batch(SCRIPTS / "steps.py", f"{longest}\n{too_long}\nc\n", nproc=1)
    assert "[rank 0] 4086\n" in result.stdout, result.stdout[-2000:]
    assert "ddptui: not sent: 4096 bytes, a terminal line holds 4095\n" in result.stdout, result.stdout[
        -2000:
    ]
    assert summary(result.stdout) == {0: "exited 0"}


def test_a_pdb_command_with_a_control_character_is_refused(ddptui: Runner) -> None:
    """^Z, ^D, ^U in a command: the rank's terminal would stop the rank, end pdb's input or kill
    the line (they used to go out raw); the command is refused in one line, the next ones run."""
    result = ddptui.batch(SCRIPTS / "steps.py", "p 2\x1a\np 3\x04\np 4\x15 5\np 6\nc\n", nproc=1)
    notes = [line for line in result.stdout.splitlines() if line.startswith("ddptui: not sent")]
    assert notes == [f"ddptui: not sent: it holds the control character '\\x{c}'" for c in ("1a", "04", "15")]
    assert "[rank 0] 6\n" in result.stdout, result.stdout
    assert summary(result.stdout) == {0: "exited 0"}


def test_a_program_on_a_pipe_gets_each_answer_before_it_sends_the_next_line(ddptui: Runner) -> None:
    """A step's answer is printed while the next command runs, unless no next line is there yet:
    a program driving `--batch -` waits for an answer before it writes the next command."""
    proc = ddptui.popen("--nproc-per-node", "2", "--batch", "-", str(SCRIPTS / "steps.py"))
    assert proc.stdin is not None and proc.stdout is not None
    out = proc.stdout.fileno()
    seen = b""

    def read_until(text: bytes) -> None:
        nonlocal seen
        deadline = time.monotonic() + 60
        while text not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and select.select([out], [], [], left)[0], seen.decode(errors="replace")
            chunk = os.read(out, 65536)
            assert chunk, seen.decode(errors="replace")
            seen += chunk

    try:
        read_until(b"-> value += 1")
        for command, answer in (("n", b"-> value += 2"), ("p 2 * 100", b"[ranks 0-1] 200")):
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
            read_until(answer)  # before the next line is written
        proc.stdin.close()
        assert proc.wait(timeout=60) == 1  # input ended with the ranks still paused
    finally:
        proc.kill()


STEPS = "s\nn\nn\ns\nn\ns\nr\nn\nunt\nb leaf\nc\nc\ncl 1\nr\nn\nn\nb leaf, i >= 5\nc\nu\nc\nc\n"
"""Into a generator, into a call, out of it, over a loop (`unt`), to a breakpoint in a call and on
to it again, on past it once cleared, then to a conditional one reached through a library's file
(a file without a breakpoint, whose calls pdb does not trace) and up into that file."""
_PLACE = re.compile(r"^(?:\[rank 0\] )?(?:> (\S+)\((\d+)\)(\S+)\(\)(->.*)?|--(Call|Return)--)$")


def places(transcript: str) -> list[str]:
    """The stops a pdb transcript shows, in order: `file line function` and --Call-- / --Return--."""
    found = []
    for line in transcript.splitlines():
        match = _PLACE.match(line.strip().removeprefix("(Pdb) "))
        if match:
            path, number, function, value, mark = match.groups()
            found.append(mark or f"{os.path.basename(path)} {number} {function}{value or ''}")
    return found


def test_stepping_lands_where_stock_pdb_lands(ddptui: Runner) -> None:
    """RankPdb answers the calls and lines `n`, `r`, `unt` and `c` pass over in its own trace
    function, without bdb's methods (stepping over a forward pass is where pdb's time goes):
    every stop is stock pdb's all the same."""
    script = SCRIPTS / "stepping.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    stock = subprocess.run(
        [sys.executable, str(script)], input=STEPS, capture_output=True, text=True, timeout=60, env=env
    )
    result = ddptui.batch(script, STEPS, nproc=1)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = places(stock.stdout)
    stops = [place for place in expected if place not in ("Call", "Return")]
    assert len(stops) == 18, stock.stdout  # 21 commands: the last `c` ends the program, 3 set breakpoints
    # `u` from leaf: the library's line (its list comprehension's frame before Python 3.12)
    assert any(place.startswith("stepping_lib.py 5 ") for place in stops), stock.stdout
    assert stops[-1] == "stepping.py 8 leaf", stock.stdout
    assert places(result.stdout) == expected, result.stdout
    assert "result 16 21 [10, 12]" in stock.stdout and "[rank 0] result 16 21 [10, 12]" in result.stdout


def test_cl_clears_every_breakpoint_without_asking(ddptui: Runner) -> None:
    """pdb's `cl` asks `Clear all breaks?` on the terminal, which a batch line cannot answer (the
    ranks sat at the question, `waiting`): sent by ddptui, it clears them and says which."""
    result = ddptui.batch(SCRIPTS / "stepping.py", "b leaf\ncl\nc\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Clear all breaks?" not in result.stdout
    for rank in (0, 1):
        lines = rank_lines(result.stdout, rank)
        assert any(
            line.startswith("Deleted breakpoint 1 at ") and line.endswith("stepping.py:7") for line in lines
        )
        assert lines[-1] == "result 16 21 [10, 12]"  # `c` ran on to the end: no breakpoint left
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


def test_restart_is_not_sent(ddptui: Runner) -> None:
    """pdb's `restart` raises pdb.Restart in a program it did not start: every rank crashed with it."""
    result = ddptui.batch(SCRIPTS / "steps.py", "restart\nrun\nc\n")
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("ddptui: not sent: pdb restarts")]
    said = [line for line in result.stdout.splitlines() if line.startswith("[rank")]
    assert len(notes) == 2 and not any("Restart" in line for line in said), result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}
