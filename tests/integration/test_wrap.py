"""Wrap mode: jobs whose own launcher (torchrun, mp.spawn) starts the ranks, which connect to ddptui."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from conftest import SCRIPTS, Runner, rank_lines, summary, until, wait_for

from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.rank_pane import RankPane

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ENVIRONMENT = 'os.environ["TORCHELASTIC_RUN_ID"], os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]'


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (an orphan of a SIGKILLed ddptui waits for init to reap it)."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def wrapped(ddptui: Runner, commands: str, *command: str) -> subprocess.CompletedProcess[str]:
    """`ddptui --batch - -- COMMAND...` to completion."""
    result: subprocess.CompletedProcess[str] = ddptui.run(
        "--stall-timeout", "3", "--batch", "-", "--", *command, stdin=commands, timeout=90
    )
    return result


def test_torchrun_ranks_step_in_lockstep_and_answer_each(ddptui: Runner) -> None:
    port = str(free_port())
    script = str(SCRIPTS / "wrap_torchrun.py")
    result = wrapped(
        ddptui, "n\np rank\nc\n", TORCHRUN, "--nproc-per-node", "2", "--master-port", port, script
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for rank in (0, 1):
        lines = rank_lines(out, rank)
        steps = [line for line in lines if line.startswith("-> ")]
        assert steps == ["-> value = torch.tensor([float(rank)])", "-> dist.all_reduce(value)"]
        assert str(rank) in lines
        assert f"rank {rank} sum 1.0" in lines
    assert out.split("(ddptui) p rank\n")[1].splitlines()[:2] == ["[rank 0] 0", "[rank 1] 1"]
    assert summary(out) == {0: "exited 0", 1: "exited 0"}
    assert "launcher: exited 0" in out
    assert "[launcher] " in out  # torchrun's own banner, shown as the launcher's


def test_spawned_ranks_get_a_pane_each_and_answer_each(ddptui: Runner) -> None:
    script = str(SCRIPTS / "wrap_spawn.py")
    result = wrapped(ddptui, "n\np rank\nc\n", sys.executable, script, str(free_port()))
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for rank in (0, 1):
        lines = rank_lines(out, rank)
        assert "-> loss = model(torch.ones(2, 4)).sum()" in lines
        assert "-> loss.backward()" in lines
        assert f"rank {rank} grad 8.0" in lines
    assert out.split("(ddptui) p rank\n")[1].splitlines()[:2] == ["[rank 0] 0", "[rank 1] 1"]
    assert summary(out) == {0: "exited 0", 1: "exited 0"}
    assert "launcher: exited 0" in out


def test_a_spawn_script_run_the_plain_way_says_how_to_run_it(ddptui: Runner) -> None:
    script = "tests/scripts/wrap_spawn.py"
    result = ddptui.run("--batch", "-", script, "29999", stdin="p 1\n", timeout=90)
    advice = (
        "ddptui: this script starts its own ranks (torch.multiprocessing.spawn): "
        f"run it as  ddptui -- python {script} 29999"
    )
    assert result.stdout.count(advice) == 1, result.stdout
    assert result.returncode != 0
    assert summary(result.stdout) == {0: "exited 1", 1: "exited 1"}


def test_a_spawned_workers_error_is_named_with_its_line(ddptui: Runner) -> None:
    script = str(SCRIPTS / "wrap_spawn_error.py")
    result = wrapped(ddptui, "@1 p rank\n", sys.executable, script, str(free_port()))
    out = result.stdout
    assert result.returncode != 0
    states = summary(out)
    assert states[1].startswith(
        "crashed NameError: name 'undefined_name' is not defined (tests/scripts/wrap_spawn_error.py:17)"
    ), out
    assert "waiting at tests/scripts/wrap_spawn_error.py:18 in all_reduce" in states[0]
    answer = out.split("(ddptui) @1 p rank\n")[1].splitlines()
    assert "[rank 1] 1" in answer, "the worker sat in post-mortem, answering"
    tail = out.split("\nrank 0: ")[1]
    assert "ProcessRaisedException" not in tail


def test_torchrun_style_options_with_underscores(ddptui: Runner) -> None:
    port = free_port()
    result = ddptui.run(
        "--batch",
        "-",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--rdzv_id=101",
        f"--rdzv_endpoint=localhost:{port}",
        str(SCRIPTS / "wrap_torchrun.py"),
        stdin=f"p {ENVIRONMENT}\nc\n",
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"[ranks 0-1] ('101', 'localhost', '{port}')" in result.stdout
    assert summary(result.stdout) == {0: "exited 0", 1: "exited 0"}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_ending_ddptui_ends_the_launcher_and_every_worker(ddptui: Runner, sig: signal.Signals) -> None:
    """torchrun's workers are orphaned when torchrun is SIGKILLed: they must go too."""
    port = str(free_port())
    proc = ddptui.popen(
        "--batch",
        "-",
        "--",
        TORCHRUN,
        "--nproc-per-node",
        "2",
        "--master-port",
        port,
        str(SCRIPTS / "wrap_torchrun.py"),
    )
    lines: queue.Queue[str] = queue.Queue()
    stdout = proc.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    seen = ""
    while "-> value = torch.tensor" not in seen:
        seen += lines.get(timeout=60)
    workers = [p for p in ddptui.leftovers() if "wrap_torchrun.py" in " ".join(p.cmdline())]
    assert len(workers) >= 3, "torchrun and its two workers"
    proc.send_signal(sig)
    assert wait_for(lambda: not ddptui.leftovers(), timeout=5), [p.cmdline() for p in ddptui.leftovers()]
    proc.wait(timeout=10)
    assert not any(alive(p) for p in workers)
    # torchrun leaves its own torchelastic_* directory behind, even when a job succeeds
    assert [f for f in ddptui.leftover_files() if not f.name.startswith("torchelastic_")] == []


async def test_the_app_makes_panes_when_the_wrapped_ranks_arrive(tmp_path: Path) -> None:
    port = str(free_port())
    command = (TORCHRUN, "--nproc-per-node", "2", "--master-port", port, str(SCRIPTS / "wrap_torchrun.py"))
    spec = LaunchSpec(target=TORCHRUN, nproc=0, command=command, stall_timeout=5)
    app = DdptuiApp(Session(spec))
    async with app.run_test(size=(160, 40)) as pilot:
        assert app.panes == []
        await until(pilot, lambda: len(app.query(RankPane)) == 2, timeout=60)
        ranks = app.session.ranks

        def prompts() -> bool:
            texts = [app.pane(r).terminal.text() for r in (0, 1)]
            paused = all(r.state.phase is Phase.PAUSED for r in ranks)
            return paused and all(f"(Pdb r{r})" in text for r, text in enumerate(texts))

        await until(pilot, prompts, timeout=60)
        await pilot.press("f10")
        await until(pilot, lambda: all("-> dist.all_reduce" in app.pane(r).terminal.text() for r in (0, 1)))
        await pilot.press("f2", *"p rank + 100", "enter")
        await until(pilot, lambda: all(f"{100 + r}" in app.pane(r).terminal.text().split() for r in (0, 1)))
        assert any("[launcher]" in line for line in app.command_log.lines_text())
        workers = [psutil.Process(r.identity.pid) for r in ranks if r.identity is not None]
        await pilot.press("ctrl+q")
        await pilot.pause()
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, timeout=15)
    assert not any(alive(w) for w in workers)


def test_two_nodes_run_through_torchrun_each_with_its_own_ranks(ddptui: Runner) -> None:
    """--nnodes 2 on one machine: one ddptui per node, each showing the rank its torchrun started."""
    port = str(free_port())
    options = ("--nnodes", "2", "--nproc-per-node", "1", "--master-port", port)
    script = str(SCRIPTS / "wrap_torchrun.py")
    nodes = [ddptui.popen("--batch", "-", *options, "--node-rank", str(node), script) for node in (0, 1)]
    for proc in nodes:  # both nodes get their commands at once: their ranks all_reduce together
        assert proc.stdin is not None
        proc.stdin.write("p rank\nc\n")
        proc.stdin.close()
    outputs = [proc.stdout.read() for proc in nodes if proc.stdout is not None]
    for proc in nodes:
        proc.wait(timeout=30)
    for node, (proc, out) in enumerate(zip(nodes, outputs, strict=True)):
        other = 1 - node
        assert proc.returncode == 0, out
        assert f"ddptui: rank {other} has not connected to ddptui (on another node?)" in out
        assert out.split("(ddptui) p rank\n")[1].splitlines()[0] == f"[rank {node}] {node}"
        assert summary(out) == {node: "exited 0", other: "never connected to ddptui"}
        assert "launcher: exited 0" in out
