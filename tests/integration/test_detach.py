"""Detached sessions: `ddptui --detach`, then `join --batch`, `sessions` and `kill` from other
processes, on real ranks under real ptys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS, Runner, summary
from detaching import DETACHED, Sessions, gone, sessions_fixture  # noqa: F401  (the fixture)
from test_listen import ALONE, in_job

STEPS = str(SCRIPTS / "steps.py")
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def test_a_second_client_sees_the_state_the_first_left(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach("--stall-timeout", "3", STEPS)
    first = sessions.join("n\n", session)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines()[-3:] == [
        "(ddptui) n",
        f"[ranks 0-1] > {STEPS}(9)<module>()",
        "[ranks 0-1] -> value += 2",
    ], first.stdout
    second = sessions.join("p value\n", session)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout == "(ddptui) p value\n[rank 0] 1\n[rank 1] 11\n"  # stepped once, still paused
    listed = ddptui.run("sessions", timeout=30)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"{session}  {STEPS}  2 ranks: 0-1: paused at ")
    assert "steps.py:9  since " in listed.stdout


def test_the_transcript_is_what_batch_prints(sessions: Sessions, ddptui: Runner) -> None:
    lines = "n\np value\n:ranks 1\np value\n"
    session = sessions.detach("--stall-timeout", "3", STEPS)
    joined = sessions.join(lines, session)
    batch = ddptui.batch(STEPS, lines, stall=3)
    assert joined.stdout == batch.stdout.split("\nrank 0: ")[0] + "\n", joined.stdout


def test_quit_ends_the_session_and_prints_the_summary(sessions: Sessions) -> None:
    session = sessions.detach(STEPS)
    ranks = sessions.ranks(session)
    assert ranks
    result = sessions.join("p value\n:quit\np 'never'\n", session)
    assert result.returncode == 1, result.stdout + result.stderr  # as --batch: ended by ddptui
    assert "never" not in result.stdout
    assert summary(result.stdout) == {
        r: "paused at tests/scripts/steps.py:8 (ended by ddptui)" for r in (0, 1)
    }
    assert gone(ranks)
    assert sessions.files() == []


def test_kill_ends_the_session_and_every_rank(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach(STEPS)
    process, ranks = sessions.process(session), sessions.ranks(session)
    assert len([p for p in ranks if "ddptui.rank" in " ".join(p.cmdline())]) == 2
    result = ddptui.run("kill", session, timeout=60)
    assert result.returncode == 0, result.stderr
    assert summary(result.stdout) == {
        r: "paused at tests/scripts/steps.py:8 (ended by ddptui)" for r in (0, 1)
    }
    assert gone([process, *ranks])
    assert sessions.files() == []
    assert ddptui.run("sessions", timeout=30).stdout == ""


def test_a_job_that_ends_ends_its_session(sessions: Sessions) -> None:
    session = sessions.detach(STEPS)
    process = sessions.process(session)
    result = sessions.join("c\n", session)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[rank 1] rank 1 value 13" in result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}
    assert gone([process])
    assert sessions.files() == []


def test_two_clients_joined_at_once_run_their_lines_one_at_a_time(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach("--stall-timeout", "3", STEPS)
    clients = [ddptui.popen("join", "--batch", "-", session) for _ in range(2)]
    for name, client in zip("AB", clients, strict=True):
        assert client.stdin is not None
        client.stdin.write(f"n\np '{name}'\n")
        client.stdin.flush()
    outputs = [client.communicate(timeout=90) for client in clients]
    for name, other, client, (out, err) in zip("AB", "BA", clients, outputs, strict=True):
        assert client.returncode == 0, out + err
        assert [line for line in out.splitlines() if line.startswith("(ddptui)")] == [
            "(ddptui) n",
            f"(ddptui) p '{name}'",
        ]
        assert f"[ranks 0-1] '{name}'" in out and f"'{other}'" not in out
    landed = {
        line.split("(")[1].split(")")[0]
        for out, _ in outputs
        for line in out.splitlines()
        if "<module>" in line
    }
    assert {"9", "10"} <= landed  # one client's n took the ranks to line 9, the other's on to 10
    after = sessions.join("p value\n", session)
    assert after.stdout == "(ddptui) p value\n[rank 0] 3\n[rank 1] 13\n"  # both steps ran, in turn


def test_wrap_mode_detaches_too(sessions: Sessions) -> None:
    session = sessions.detach("--stall-timeout", "3", "--", TORCHRUN, "--nproc-per-node", "2", STEPS)
    result = sessions.join("p value\n", session)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[rank 0] 0\n[rank 1] 10\n" in result.stdout
    killed = subprocess.run(
        sessions.runner.argv("kill", session),
        env=sessions.runner.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == 0, killed.stderr


def test_listen_detach_prints_the_line_for_the_job_whose_ranks_join_the_session(
    sessions: Sessions, ddptui: Runner
) -> None:
    started = ddptui.run("listen", "--detach", "--world-size", "1", timeout=60)
    assert started.returncode == 0, started.stderr
    said, export = started.stdout.splitlines()
    found = DETACHED.match(said)
    assert found and found.group(2) == "ddptui listen (1 rank)", said
    session = found.group(1)
    assert export.startswith("export DDPTUI_SOCKET=tcp:127.0.0.1:"), export
    rank = in_job(ddptui, export, sys.executable, STEPS, env=ALONE)
    joined = sessions.join("n\np value\n", session)
    assert joined.stdout.endswith("(ddptui) p value\n[rank 0] 1\n"), joined.stdout
    killed = ddptui.run("kill", session, timeout=60)
    assert summary(killed.stdout) == {0: "paused at tests/scripts/steps.py:9 (left running, undebugged)"}
    log, _ = rank.communicate(timeout=30)
    assert rank.returncode == 0 and "rank 0 value 3" in log, log  # it ran on, undebugged
