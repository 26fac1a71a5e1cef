"""A device mesh, learned from the ranks: `:mesh`, coordinates in `:state`, ranks selected by them."""

from __future__ import annotations

from conftest import SCRIPTS, Runner


def said(stdout: str, command: str) -> list[str]:
    """The `ddptui:` lines printed after one command line."""
    after = stdout.split(f"(ddptui) {command}\n", 1)[1].split("(ddptui) ", 1)[0]
    return [line[len("ddptui: ") :] for line in after.splitlines() if line.startswith("ddptui: ")]


def test_the_mesh_its_groups_and_selection_by_coordinates(ddptui: Runner) -> None:
    commands = [
        ":mesh",
        ":state",
        "@tp=0 p rank",
        ":ranks dp=1",
        "p rank * 10",
        ":ranks all",
        "@pp=0 p 1",
        "c",
    ]
    result = ddptui.batch(SCRIPTS / "mesh_pause.py", "\n".join(commands) + "\n", nproc=4, stall=10)
    mesh = said(result.stdout, ":mesh")
    assert mesh[:5] == [
        "mesh dp=2 × tp=2",
        "  rank 0 (dp 0, tp 0)",
        "  rank 1 (dp 0, tp 1)",
        "  rank 2 (dp 1, tp 0)",
        "  rank 3 (dp 1, tp 1)",
    ], result.stdout
    assert "group 0: WORLD, ranks 0-3" in mesh
    assert any(
        line.startswith("group ") and ": tp group [2,3] (dp=1) (mesh_tp), ranks 2-3" in line for line in mesh
    )
    assert any(": dp group [1,3] (tp=1) (mesh_dp), ranks 1,3" in line for line in mesh)
    assert any(": group [0,3], ranks 0,3" in line for line in mesh)
    assert said(result.stdout, ":state")[3].startswith("rank 3 (dp 1, tp 1): paused at ")
    assert "[ranks 0,2] 0\n" not in result.stdout  # each rank answers for itself
    assert (
        "[rank 0] 0" in result.stdout and "[rank 2] 2" in result.stdout and "[rank 1] 1" not in result.stdout
    )
    assert said(result.stdout, ":ranks dp=1") == ["target ranks: 2-3"]
    assert "[rank 2] 20" in result.stdout and "[rank 3] 30" in result.stdout
    assert "ddptui: no mesh dim 'pp' (the mesh has dp, tp)" in result.stdout
    timeouts = [line for line in said(result.stdout, ":state") if line.startswith("user timeout")]
    assert timeouts == [
        "user timeout 1800 s of process groups WORLD, dp group [0,2] (tp=0), dp group [1,3] (tp=1), "
        "tp group [0,1] (dp=0), tp group [2,3] (dp=1), group [0,3] suspended while ranks 0-3 are paused "
        "(--pg-timeout applies)"
    ]
    assert result.returncode == 0, result.stdout
