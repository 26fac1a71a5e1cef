"""`ddptui listen`: ranks of a job ddptui did not start (torchrun on several nodes, srun) connect over TCP."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, SCRIPTS, Runner, rank_lines, summary, until, wait_for

from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank import protocol
from ddptui.rank.protocol import Hello, Identity
from ddptui.ui.app import DdptuiApp

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
ALONE = {"RANK": "0", "WORLD_SIZE": "1"}
"""The environment of a one-rank job's only rank (torchrun and srun scripts set these)."""
LINE = re.compile(r"export DDPTUI_SOCKET=tcp:(?P<host>[\w.]+):(?P<port>\d+) .*")


class Listener:
    """`ddptui listen ... --batch -` in the background: its commands given up front, its output read
    line by line on a thread (so that the line to export can be picked out while it waits)."""

    def __init__(self, ddptui: Runner, commands: str, *options: str) -> None:
        self.proc = ddptui.popen("listen", "--stall-timeout", "3", "--batch", "-", *options)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(commands)  # read only once every rank is here
        self.proc.stdin.close()
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def export(self) -> str:
        """The shell line the listener printed for the job's environment."""
        while True:
            line = self.lines.get(timeout=30)
            self.seen.append(line)
            found = LINE.search(line)
            if found:
                return found.group(0)

    def finish(self, timeout: float = 90) -> tuple[int, str]:
        """Wait for the end; the exit status and the whole output."""
        status = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        assert self.proc.stderr is not None
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return status, "".join(self.seen) + self.proc.stderr.read()


def in_job(
    ddptui: Runner, export: str, *command: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Run `command` the way a job script would, after the listener's line (as in an sbatch file)."""
    script = f"{export}\nexec {' '.join(command)}"
    return subprocess.Popen(
        ["bash", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(ddptui.env, **(env or {})),
        cwd=ROOT,
    )


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_torchrun_nodes_connect_to_one_listener_and_step_in_lockstep(ddptui: Runner) -> None:
    """Two torchrun agents (`--nnodes 2`, c10d rendezvous) stand in for two nodes of one job."""
    listener = Listener(ddptui, "n\np rank\n:state\nc\n", "--world-size", "4")
    export = listener.export()
    rdzv = f"127.0.0.1:{free_port()}"
    nodes = [
        in_job(
            ddptui,
            export,
            TORCHRUN,
            *("--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "2"),
            *("--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv, "--rdzv-id", "listen-test"),
            str(SCRIPTS / "wrap_torchrun.py"),
        )
        for node in (0, 1)
    ]
    status, out = listener.finish()
    logs = [node.communicate(timeout=30)[0] for node in nodes]
    assert status == 0, out
    assert [node.returncode for node in nodes] == [0, 0], logs
    assert "[ranks 0-3] -> dist.all_reduce(value)" in out  # one step, all four in lockstep
    assert out.split("(ddptui) p rank\n")[1].splitlines()[:4] == [f"[rank {r}] {r}" for r in range(4)]
    host = socket.gethostname()
    where = "paused at tests/scripts/wrap_torchrun.py:12"
    for rank in range(4):  # true global ranks; each node's local ranks are 0 and 1
        assert re.search(rf"rank {rank}: {where}  \[local rank {rank % 2} on {host}, pid \d+\]", out), out
        assert f"rank {rank} sum 6.0" in rank_lines(out, rank)
    assert summary(out) == {r: "exited 0" for r in range(4)}
    assert wait_for(lambda: not ddptui.leftovers(), timeout=10)


def test_a_connection_without_the_token_gets_nothing_and_is_logged(ddptui: Runner) -> None:
    listener = Listener(ddptui, "p 6 * 7\nc\n", "--world-size", "1")
    export = listener.export()
    found = LINE.search(export)
    assert found is not None
    address = (found.group("host"), int(found.group("port")))
    with socket.create_connection(address, timeout=10) as intruder:  # claims rank 0 with a wrong token
        intruder.sendall(Hello(protocol.VERSION, "0" * 32, Identity(0, 0, 1, "evil", 1)).encode())
        intruder.sendall(b'{"k":"paused","where":["x.py",1,"f"]}\n')
        received = b""
        # the listener hangs up, having sent nothing: a reset if it had not read all we sent
        with contextlib.suppress(ConnectionResetError):
            while chunk := intruder.recv(65536):
                received += chunk
    assert received == b""
    rank = in_job(ddptui, export, sys.executable, str(SCRIPTS / "steps.py"), env=ALONE)
    status, out = listener.finish()
    rank.communicate(timeout=30)
    assert status == 0, out
    assert re.search(r"ddptui: refused a connection from 127\.0\.0\.1:\d+: wrong token", out), out
    assert "42" in rank_lines(out, 0)  # the real rank, with the token, is debugged as usual
    assert summary(out) == {0: "exited 0"}


def test_a_flood_of_strangers_and_a_full_fd_table_are_said_in_a_few_lines(ddptui: Runner) -> None:
    """200 peers with a wrong token are 3 lines and a count; accepts that fail for want of file
    descriptors are one line, no traceback, and the listener accepts the real rank afterwards."""
    listener = Listener(ddptui, "c\n", "--world-size", "1")
    export = listener.export()
    found = LINE.search(export)
    assert found is not None
    address = (found.group("host"), int(found.group("port")))
    hello = Hello(protocol.VERSION, "0" * 32, Identity(0, 0, 1, "evil", 1)).encode()
    for _ in range(200):
        with socket.create_connection(address, timeout=10) as intruder:
            intruder.sendall(hello)
            with contextlib.suppress(ConnectionResetError):
                intruder.recv(1)  # until the listener hung up
    process = psutil.Process(listener.proc.pid)
    limits = process.rlimit(psutil.RLIMIT_NOFILE)
    process.rlimit(psutil.RLIMIT_NOFILE, (process.num_fds() + 2, limits[1]))
    held = [socket.create_connection(address, timeout=10) for _ in range(20)]  # more than it may open
    wait_for(lambda: process.num_fds() >= process.rlimit(psutil.RLIMIT_NOFILE)[0], timeout=5)
    for sock in held:
        sock.close()
    process.rlimit(psutil.RLIMIT_NOFILE, limits)
    rank = in_job(ddptui, export, sys.executable, str(SCRIPTS / "steps.py"), env=ALONE)
    status, out = listener.finish()
    rank.communicate(timeout=30)
    assert status == 0, out
    assert "Traceback" not in out, out
    assert len(re.findall("refused a connection from", out)) == 3, out
    counted = re.findall(r"ddptui: (\d+) more connections refused in the last 10 s", out)
    assert sum(map(int, counted)) >= 197, out  # the held ones may be refused too
    shortage = [line for line in out.splitlines() if "cannot accept connections" in line]
    assert shortage == [
        "ddptui: cannot accept connections: Too many open files (EMFILE); retrying every second"
    ], out
    assert summary(out) == {0: "exited 0"}


@pytest.mark.parametrize("policy", ["continue", "exit"])
def test_a_rank_left_by_ddptui_runs_on_or_exits_as_told(ddptui: Runner, policy: str) -> None:
    listener = Listener(ddptui, "n\n", "--world-size", "1", "--on-disconnect", policy)
    export = listener.export()
    rank = in_job(ddptui, export, sys.executable, str(SCRIPTS / "steps.py"), env=ALONE)
    status, out = listener.finish()  # the commands end with the rank at its prompt: ddptui hangs up
    log, _ = rank.communicate(timeout=30)
    assert status == 1, out  # a rank was still paused, as when quitting the app
    if policy == "continue":
        assert summary(out) == {0: "paused at tests/scripts/steps.py:9 (left running, undebugged)"}
        assert rank.returncode == 0, log
        assert "ddptui: rank 0 lost ddptui; running on without it" in log
        assert "rank 0 value 3" in log  # its output is its own again, and no breakpoint stops it
    else:
        assert summary(out) == {0: "paused at tests/scripts/steps.py:9 (left to exit: --on-disconnect exit)"}
        assert rank.returncode == 1, log
        assert "ddptui: rank 0 lost ddptui; exiting (--on-disconnect exit)" in log
        assert "rank 0 value" not in log


def test_listen_refuses_a_busy_port_and_bad_options_in_one_line(ddptui: Runner) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = ddptui.run("listen", "--port", port, "--batch", "-")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"ddptui: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    for options, error in [
        (("--port", "70000"), "--port 70000 is not a port number"),
        (("--world-size", "0"), "--world-size must be at least 1, not 0"),
        (("--on-disconnect", "stay"), "argument --on-disconnect: invalid choice: 'stay'"),
    ]:
        result = ddptui.run("listen", *options)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1 and error in result.stderr, result.stderr


def test_the_line_can_be_written_to_a_private_file(ddptui: Runner, tmp_path: Path) -> None:
    env_file = tmp_path / "ddptui.env"
    listener = Listener(ddptui, "c\n", "--world-size", "1", "--env-file", str(env_file))
    export = listener.export()
    assert env_file.read_text() == export + "\n"
    assert env_file.stat().st_mode & 0o777 == 0o600
    rank = in_job(ddptui, f". {env_file}", sys.executable, str(SCRIPTS / "steps.py"), env=ALONE)
    status, out = listener.finish()
    rank.communicate(timeout=30)
    assert status == 0, out
    assert "rank 0 value 3" in rank_lines(out, 0)
    assert summary(out) == {0: "exited 0"}


async def test_the_app_shows_the_line_and_a_pane_for_each_rank_that_connects() -> None:
    app = DdptuiApp(Session(LaunchSpec(target="listen", nproc=0, listen=("127.0.0.1", 0), stall_timeout=5)))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: any("export " in line for line in app.command_log.lines_text()))
        exports = [
            line.strip() for line in app.command_log.lines_text() if line.strip().startswith("export ")
        ]
        assert len(exports) > 1 and all(len(line) <= 160 for line in exports)  # folded to fit the log
        assert app.panes == []
        ranks = [
            subprocess.Popen(
                ["bash", "-c", "\n".join([*exports, f"exec {sys.executable} {SCRIPTS / 'steps.py'}"])],
                env=dict(os.environ, RANK=str(rank), WORLD_SIZE="2"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for rank in (0, 1)
        ]
        try:
            await until(
                pilot, lambda: len(app.panes) == 2 and all("(Pdb r" in p.terminal.text() for p in app.panes)
            )
            assert [pane.identity.split(" · ")[0] for pane in app.panes] == ["local rank 0", "local rank 1"]
            await pilot.press("f5")
            await until(pilot, lambda: "rank 1 value 13" in app.pane(1).terminal.text())
            await until(pilot, lambda: all(not r.state.alive for r in app.session.ranks))
        finally:
            for rank in ranks:
                rank.kill()
                rank.wait(timeout=10)


def test_srun_tasks_are_ranks_by_their_slurm_procid(ddptui: Runner) -> None:
    """srun without torchrun: each task knows its rank from SLURM_PROCID, even before init_process_group."""
    listener = Listener(ddptui, "p rank\nn\nc\n")
    export = listener.export()
    port = str(free_port())
    tasks = [
        in_job(
            ddptui,
            export,
            sys.executable,
            str(SCRIPTS / "srun_task.py"),
            env={"SLURM_PROCID": str(task), "SLURM_LOCALID": "0", "SLURM_NTASKS": "2", "PORT": port},
        )
        for task in (1, 0)  # the order they connect in does not matter
    ]
    status, out = listener.finish()
    logs = [task.communicate(timeout=30)[0] for task in tasks]
    assert status == 0, out + "".join(logs)
    assert out.split("(ddptui) p rank\n")[1].splitlines()[:2] == ["[rank 0] 0", "[rank 1] 1"]
    assert "[ranks 0-1] -> value = torch.tensor([float(rank + 1)])" in out
    for rank in (0, 1):
        assert f"task {rank} sum 3.0" in rank_lines(out, rank)
    assert summary(out) == {0: "exited 0", 1: "exited 0"}
