"""Bad input to `--detach`, `sessions`, `join` and `kill`: one line, a non-zero exit, no traceback."""

from __future__ import annotations

import os

import pytest
from conftest import SCRIPTS, Runner
from detaching import Sessions, gone, one_line, sessions_fixture  # noqa: F401  (the fixture)

STEPS = str(SCRIPTS / "steps.py")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("--detach", "--batch", "-", STEPS),
            "--detach runs without --batch: drive the session with ddptui join",
        ),
        (("--detached-timeout", "5", STEPS), "--detached-timeout applies to --detach sessions only"),
        (("--detach", "--detached-timeout", "-1", STEPS), "--detached-timeout must be a positive number"),
        (("--detach", "--detached-timeout", "nan", STEPS), "--detached-timeout must be a positive number"),
        (("--detach", "no_such_script.py"), "no such script: no_such_script.py"),
        (
            ("join", "--batch", "-", "zz"),
            "'zz' is not a session id (six hex digits; ddptui sessions lists them)",
        ),
        (("join", "--batch", "-", "abcdef"), "no session abcdef (ddptui sessions lists them)"),
        (("join", "--batch", "-"), "no session runs (start one with ddptui --detach SCRIPT)"),
        (("join", "--batch", "/no/such/file"), "no such batch file: /no/such/file"),
        (("join",), "no session runs (start one with ddptui --detach SCRIPT)"),
        (("join", "abcdef"), "no session abcdef (ddptui sessions lists them)"),
        (("kill",), "the following arguments are required: id (see ddptui kill --help)"),
        (("kill", "abcdef"), "no session"),
        (("sessions", "--all"), "unrecognized arguments: --all (see ddptui sessions --help)"),
    ],
)
def test_bad_input_is_one_line(sessions: Sessions, ddptui: Runner, args: tuple[str, ...], said: str) -> None:
    assert one_line(ddptui, *args).startswith(said)
    assert sessions.files() == []


def test_an_unknown_id_among_live_sessions_and_two_sessions_without_an_id(
    sessions: Sessions, ddptui: Runner
) -> None:
    first, second = sessions.detach(STEPS), sessions.detach(STEPS)
    other = "000000" if "000000" not in (first, second) else "111111"
    assert (
        one_line(ddptui, "join", "--batch", "-", other) == f"no session {other} (ddptui sessions lists them)"
    )
    assert one_line(ddptui, "kill", other) == f"no session {other} (ddptui sessions lists them)"
    said = one_line(ddptui, "join", "--batch", "-", stdin="p 1\n")
    assert said == f"2 sessions run, name one: {first}, {second}"


def test_a_session_directory_open_to_others_or_a_symlink_is_refused(
    sessions: Sessions, ddptui: Runner
) -> None:
    sessions.home.mkdir(mode=0o755)
    os.chmod(sessions.home, 0o755)
    assert (
        one_line(ddptui, "--detach", STEPS) == f"{sessions.home} is open to other users (mode 755, not 700)"
    )
    assert one_line(ddptui, "sessions").startswith(f"{sessions.home} is open to other users")
    sessions.home.rmdir()
    elsewhere = sessions.runtime / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    sessions.home.symlink_to(elsewhere)
    said = one_line(ddptui, "--detach", STEPS)
    assert said == f"{sessions.home} is not a directory (a symlink or a file): not using it for sessions"
    assert list(elsewhere.iterdir()) == []


def test_a_socket_path_that_is_not_a_session_is_one_line(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach(STEPS)
    path = sessions.home / f"{session}.sock"
    path.unlink()
    path.write_text("not a socket")
    said = one_line(ddptui, "join", "--batch", "-", session, stdin="p 1\n")
    assert said.startswith(f"cannot reach session {session} at {path}: ")
    process, ranks = sessions.process(session), sessions.ranks(session)
    process.terminate()  # SIGTERM ends a session as kill does
    assert gone([process, *ranks])
