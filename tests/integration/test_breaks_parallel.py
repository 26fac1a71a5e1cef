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
