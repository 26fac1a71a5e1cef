"""What ends a detached session and what does not: its terminal's hangup, SIGKILL,
`--detached-timeout`, and who may talk on its socket."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time

import psutil
from conftest import ROOT, SCRIPTS, Runner, wait_for
from detaching import Sessions, gone, sessions_fixture  # noqa: F401  (the fixture)
from ptyprocess import PtyProcessUnicode

STEPS = str(SCRIPTS / "steps.py")


def test_the_hangup_of_the_terminal_that_started_it_ends_nothing(sessions: Sessions, ddptui: Runner) -> None:
    shell = f"{sys.executable} -m ddptui --detach {STEPS} && sleep 600"
    terminal = PtyProcessUnicode.spawn(["sh", "-c", shell], env=ddptui.env, cwd=str(ROOT))
    try:
        said = ""
        while "detached:" not in said:
            said += terminal.read(4096)  # the line comes within the pytest timeout or the read fails
        session = said.split("session ")[1][:6]
        ranks = sessions.ranks(session)
    finally:
        terminal.close(force=True)  # the terminal goes away: SIGHUP to everything on it
    assert gone([psutil.Process(terminal.pid)] if psutil.pid_exists(terminal.pid) else [])
    time.sleep(1)  # a hangup that ended the session would have ended it by now
    assert all(rank.is_running() for rank in ranks)
    result = sessions.join("p value\n", session)
    assert result.stdout.endswith("(ddptui) p value\n[rank 0] 0\n[rank 1] 10\n"), (
        result.stdout + result.stderr
    )


def test_sigkill_of_the_session_process_ends_every_rank(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach(STEPS)
    process, ranks = sessions.process(session), sessions.ranks(session)
    process.kill()
    assert gone(ranks), "the reaper ends the ranks of a session process that was killed"
    result = sessions.join("p 1\n", session)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"ddptui: error: session {session} has ended (its process is gone)\n"
    assert sessions.files() == []
    assert ddptui.run("sessions", timeout=30).stdout == ""


def test_a_session_no_client_joins_ends_after_the_detached_timeout(sessions: Sessions) -> None:
    started = time.monotonic()
    session = sessions.detach("--detached-timeout", "4", STEPS)
    process, ranks = sessions.process(session), sessions.ranks(session)
    joined = sessions.join("p 1\n", session)  # a client that leaves starts the count again
    assert joined.returncode == 0, joined.stderr
    left = time.monotonic()
    assert process.is_running()
    assert gone([process, *ranks], timeout=60)
    assert time.monotonic() - left >= 3.5 and time.monotonic() - started < 60
    assert sessions.files() == []


def test_a_wrong_token_gets_zero_bytes_and_the_session_runs_on(sessions: Sessions) -> None:
    session = sessions.detach(STEPS)
    entry = sessions.entry(session)
    for hello in (
        {"k": "hello", "token": "0" * 32, "version": 1},
        {"k": "hello", "token": "", "version": 1},
        {"k": "line", "text": "c"},
        "not json",
    ):
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(15)
            client.connect(str(sessions.home / f"{session}.sock"))
            client.sendall((json.dumps(hello) if isinstance(hello, dict) else hello).encode() + b"\n")
            assert client.recv(4096) == b"", hello
    with socket.socket(socket.AF_UNIX) as client:  # the right token, another version: one line
        client.settimeout(15)
        client.connect(str(sessions.home / f"{session}.sock"))
        client.sendall(json.dumps({"k": "hello", "token": entry["token"], "version": 99}).encode() + b"\n")
        answer = client.makefile("rb").read()
    assert json.loads(answer) == {"k": "refused", "reason": "session speaks protocol 2, not 99"}
    result = sessions.join("p value\n", session)
    assert result.returncode == 0 and result.stdout.endswith("[rank 0] 0\n[rank 1] 10\n"), result.stdout


def test_a_tampered_token_is_one_line_and_the_files_are_private(sessions: Sessions) -> None:
    session = sessions.detach(STEPS)
    assert oct(sessions.home.stat().st_mode & 0o777) == "0o700"
    for name in (f"{session}.sock", f"{session}.json"):
        assert oct((sessions.home / name).stat().st_mode & 0o777) == "0o600"
    path = sessions.home / f"{session}.json"
    entry = json.loads(path.read_text())
    path.write_text(json.dumps(dict(entry, token="f" * 32)))
    result = sessions.join("p value\n", session)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"ddptui: error: session {session} refused the connection (a wrong token, or no ddptui session)\n"
    )
    path.write_text(json.dumps(entry))
    os.kill(int(entry["pid"]), signal.SIGTERM)  # SIGTERM ends it as kill does
    assert wait_for(lambda: sessions.files() == [], 30)
