"""The breakpoint features (`--break`, all-stop, `:until`, `:until-diverge`) on the jobs people
train now, as a user drives them in batch mode: FSDP2, tensor parallel, a 2-D mesh and a pipeline,
each a real gloo job whose ranks stop in a module's own `forward`."""

from __future__ import annotations

from conftest import SCRIPTS, Runner, summary
from test_until_collective import line_of

FSDP2 = SCRIPTS / "breaks_fsdp2.py"


def where(tag: str, script: str) -> str:
    """`tests/scripts/SCRIPT.py:LINE` of the line marked `# @tag`, as `--break` takes it."""
    return f"tests/scripts/{script}:{line_of(tag, SCRIPTS / script)}"


def test_comparing_an_fsdp2_parameter_in_forward_leaves_the_training_step_intact(ddptui: Runner) -> None:
    """In `forward`, `self.outer.bias` is FSDP2's unsharded parameter: summarising it must leave
    its storage as FSDP2 made it, for FSDP2 frees it after the forward (resizes it to 0 bytes)."""
    at = where("forward", "breaks_fsdp2.py")
    result = ddptui.batch(FSDP2, ":compare self.outer.bias\nc\nc\nc\n", "--break", at, nproc=2, stall=10)
    out = result.stdout
    assert "ddptui: all 2 ranks equal" in out, out
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out
    assert "rank 0 loss -78.6779" in out


def test_all_stop_shows_a_rank_waiting_on_a_recvs_work_as_waiting_never_interrupts_it(
    ddptui: Runner,
) -> None:
    """Rank 1 waits on an irecv's work (`work.wait()`, C code under the user's line) while rank 0
    stops: it is waiting in that irecv, and once rank 0 sends, it runs on to its end."""
    result = ddptui.batch(SCRIPTS / "breaks_p2p_wait.py", "c\n", nproc=2, stall=30)
    out = result.stdout
    at = where("send", "breaks_p2p_wait.py")
    assert (
        f"ddptui: all-stop: rank 0 stopped at {at} (breakpoint); rank 1 waiting in irecv (WORLD) for rank 0"
        in (out)
    ), out
    assert "Program interrupted" not in out
    assert "[rank 1] rank 1 got [1.0, 1.0, 1.0]" in out
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out


def test_a_break_in_a_pipeline_stages_forward_leaves_the_other_stage_waiting_in_its_recv(
    ddptui: Runner,
) -> None:
    """At step 1 stage 0 stops in its forward while stage 1 waits in the schedule for its
    activations: stage 1 is waiting in irecv, not interrupted; `c` takes each stage to the break
    in turn, and the job ends."""
    at = where("forward", "breaks_pipeline.py")
    result = ddptui.batch(
        SCRIPTS / "breaks_pipeline.py", "c\nc\nc\nc\nc\n", "--break", f"{at},step == 1", nproc=2, stall=30
    )
    out = result.stdout
    assert (
        f"ddptui: all-stop: rank 0 stopped at {at} (breakpoint); rank 1 waiting in irecv (WORLD) for rank 0"
        in (out)
    ), out
    assert "Program interrupted" not in out
    assert " in step)" not in out  # placed again after a step: still in irecv, not the schedule's `step`
    assert "ddptui: c not sent to rank 1, not at a prompt (waiting at tests/scripts/breaks_pipeline.py" in out
    assert "[rank 1] rank 1 step 2 losses [1.1764, 1.1764]" in out
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out


def test_a_break_on_one_rank_in_a_tp_forward_leaves_the_other_waiting_in_the_all_reduce(
    ddptui: Runner,
) -> None:
    """`--break FILE:LINE,dist.get_rank() == 1` before the Rowwise layer: rank 0 runs on into its
    all-reduce (a functional collective, waited on in `wait_tensor`) and is shown waiting there,
    not interrupted; each `c` of rank 1 takes both through a step, rank 0 waiting again at once (not
    after the stall timeout), and the job ends."""
    at = where("down", "breaks_tp.py")
    result = ddptui.batch(
        SCRIPTS / "breaks_tp.py", "c\nc\nc\nc\n", "--break", f"{at},dist.get_rank() == 1", nproc=2, stall=30
    )
    out = result.stdout
    said = f"all-stop: rank 1 stopped at {at} (breakpoint); rank 0 waiting in wait_tensor (WORLD) for rank 1"
    assert out.count(said) == 3, out  # at every step: released by rank 1's `c`, rank 0 waits again
    assert "Program interrupted" not in out
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out


def test_an_until_whose_expr_issues_a_collective_some_ranks_skip_raises_and_never_hangs(
    ddptui: Runner,
) -> None:
    """Rank 1 stops in `forward` (`--break FILE:LINE,dist.get_rank() == 1`), rank 0 waits in the
    all-reduce: `full_tensor()` all-gathers across tp, and evaluated by rank 1 alone it would wait
    for rank 0 forever. It raises on rank 1 before the all-gather instead and says why (`:until`
    stops, `:compare` says so), and the job goes on. Evaluated by both ranks together, it runs."""
    at = where("forward", "breaks_tp.py")
    expr = "bool(self.up.weight.full_tensor().isnan().any())"
    total = ":compare self.up.weight.full_tensor().sum()\n"
    commands = f":until {expr}\n{total}" + "c\n" * 4
    result = ddptui.batch(
        SCRIPTS / "breaks_tp.py", commands, "--break", f"{at},dist.get_rank() == 1", nproc=2, stall=30
    )
    out = result.stdout
    assert "still running" not in out, out
    unpaired = "not run: all_gather_into_tensor on group [0,1] waits for rank 0, which does not evaluate it"
    assert f"{expr} raised on rank 1 (from stop 0): Unpaired: {unpaired}" in out, out
    assert f":until {expr} stopped: rank 0 waiting at tests/scripts/breaks_tp.py:" in out
    assert f"ddptui: ≠ rank 1  │ raised Unpaired: {unpaired}" in out
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out
    together = ddptui.batch(SCRIPTS / "breaks_tp.py", f"{total}:until {expr}\n", "--break", at, nproc=2)
    assert "ddptui: all 2 ranks equal" in together.stdout, together.stdout
    assert f":until {expr} stopped at stop 3: ranks 0-1 exited 0" in together.stdout


def test_an_until_whose_continue_is_held_counts_no_stop(ddptui: Runner) -> None:
    """An EXPR still running on every rank past its 5 s holds their `c`: the hunt made no continue,
    so it says it stopped before stop 1, not at it."""
    expr = '__import__("os").system("sleep 6") == 1'
    result = ddptui.batch(SCRIPTS / "steps.py", f":until {expr}\n", nproc=2)
    out = result.stdout
    assert f"ddptui: :until {expr} stopped\n" in out, out
    assert f"ddptui: c not sent to ranks 0-1: its evaluation of {expr} still runs; !c sends anyway" in out
