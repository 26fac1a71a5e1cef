"""Bad input: one clear line on stderr, a non-zero status, no traceback, nothing left running."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, SCRIPTS, Runner


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no/such/train.py"], "ddptui: error: no such script: no/such/train.py"),
        (["--frobnicate", "x.py"], "ddptui: error: unrecognized arguments: --frobnicate (see ddptui --help)"),
        (
            ["--nproc-per-node", "0", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --nproc-per-node must be at least 1, not 0",
        ),
        (
            ["--nproc-per-node", "two", "x.py"],
            "ddptui: error: argument --nproc-per-node/--nproc_per_node: 'two' is not a number, auto, cpu"
            " or gpu (see ddptui --help)",
        ),
        (
            ["--stall-timeout", "-1", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --stall-timeout must be a positive number of seconds, not -1.0",
        ),
        (
            ["--stall-timeout", "nan", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --stall-timeout must be a positive number of seconds, not nan",
        ),
        (
            ["--timeout", "10", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --timeout applies to --batch runs only",
        ),
        (
            ["--batch", "-", "--timeout", "0", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --timeout must be a positive number of seconds, not 0.0",
        ),
        (
            ["--scrollback", "-5", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --scrollback must be 0 or more lines, not -5",
        ),
        (
            ["--stall-timeout", "inf", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: --stall-timeout must be a positive number of seconds, not inf",
        ),
        (
            ["--master-port", "1234", "--", "torchrun", "train.py"],
            "ddptui: error: --master-port is for the launcher: put it after -- (ddptui -- torchrun ...)",
        ),
        (
            ["--batch", "-", "--"],
            "ddptui: error: nothing to run after -- (usage: ddptui [options] -- COMMAND...)",
        ),
        (
            ["--", "no-such-launcher"],
            "ddptui: error: cannot run no-such-launcher: no such command (or not executable)",
        ),
        ([], "ddptui: error: no script given (usage: ddptui [options] SCRIPT [ARGS...])"),
        (
            ["--batch", "no-such-commands.txt", str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: no such batch file: no-such-commands.txt",
        ),
        (["tests"], "ddptui: error: tests is a directory without __main__.py"),
        (  # the app on pipes: no screen to draw on, no keys to read
            [str(EXAMPLES / "train_ddp.py")],
            "ddptui: error: the app needs a terminal (standard input and output);"
            " scripts and CI: --batch FILE",
        ),
    ],
)
def test_bad_usage(ddptui: Runner, args: list[str], message: str) -> None:
    result = ddptui.run(*args)
    assert (result.returncode, result.stderr, result.stdout) == (2, message + "\n", "")


def test_script_that_does_not_compile(ddptui: Runner, tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("x = 1\ndef f(:\n")
    result = ddptui.run(str(script))
    assert result.returncode == 2
    assert result.stderr == f"ddptui: error: cannot run {script}: SyntaxError: invalid syntax (line 2)\n"


def test_binary_script(ddptui: Runner, tmp_path: Path) -> None:
    script = tmp_path / "binary.py"
    script.write_bytes(b"\x7fELF\x00\x01\x02")
    result = ddptui.run(str(script))
    assert result.returncode == 2
    assert (
        result.stderr.startswith(f"ddptui: error: cannot run {script}: ") and result.stderr.count("\n") == 1
    )


def test_busy_master_port(ddptui: Runner) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = ddptui.run("--master-port", str(port), "--batch", "-", str(EXAMPLES / "train_ddp.py"))
    assert result.returncode == 2
    assert (
        result.stderr == f"ddptui: error: --master-port {port} is busy on 127.0.0.1: Address already in use\n"
    )
    assert ddptui.leftover_files() == []


def test_stdout_closed_early(ddptui: Runner) -> None:
    proc = subprocess.Popen(
        ddptui.argv("--batch", "-", str(SCRIPTS / "steps.py")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ddptui.env,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `ddptui --batch ... | head -1`
    _, err = proc.communicate(b"p value\nc\n", timeout=30)
    assert proc.returncode == 1 and b"Traceback" not in err


def test_a_tmpdir_too_long_for_a_socket_path_falls_back(ddptui: Runner, tmp_path: Path) -> None:
    deep = ddptui.tmpdir / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    ddptui.env["TMPDIR"] = str(deep)
    result = ddptui.batch(SCRIPTS / "steps.py", "c\n")
    assert result.returncode == 0, result.stderr
    assert "internal error" not in result.stderr
