"""`ddptui join ID`: a detached session's app in real terminals (tmux): shown, stepped, left with
Ctrl+D and joined again with the same screen; two terminals at once; a joined terminal that
hangs up ends nothing; `ddptui kill` and `:quit` end everything and say so in the terminal."""

from __future__ import annotations

import psutil
from conftest import SCRIPTS, Runner, wait_for
from detaching import Sessions, gone, sessions_fixture  # noqa: F401  (the fixture)
from terminal import Tmux, needs_tmux, tmux_fixture  # noqa: F401  (the fixture)

pytestmark = needs_tmux

STEPS = str(SCRIPTS / "steps.py")
AT_8 = "-> value += 1"
AT_9 = "-> value += 2"
AT_10 = '-> print(f"rank {rank} value {value}")'


def in_panes(term: Tmux, text: str) -> int:
    """How many panes show `text` as their current line (the command log prefixes `[rank N] `)."""
    screen = term.screen()
    return screen.count(text) - screen.count(f"] {text}")


def app_lines(term: Tmux) -> list[str]:
    """The screen without its blank lines."""
    return [line for line in term.screen().splitlines() if line.strip()]


def test_join_shows_the_app_ctrl_d_leaves_it_running_and_a_new_join_sees_the_same_screen(
    sessions: Sessions, tmux: type[Tmux]
) -> None:
    session = sessions.detach("--nproc-per-node", "2", STEPS)
    env = f"XDG_RUNTIME_DIR={sessions.runtime}"
    first = tmux("join", session, size=(160, 40), env=env)
    assert first.shows("(Pdb r1)"), first.screen()
    first.keys("F10")  # the app in the session steps both ranks
    assert wait_for(lambda: in_panes(first, AT_9) == 2, 30), first.screen()
    assert first.shows("r0-1  paused at tests/scripts/steps.py:9"), first.screen()  # the step settled
    before = app_lines(first)
    ranks = sessions.ranks(session)
    first.keys("C-d")
    assert first.exit_status() == 0
    assert first.shows(f"ddptui: detached from session {session}: ddptui join {session} opens it again")
    assert first.stty[0].read_text() == first.stty[1].read_text()  # the terminal as it was
    assert all(rank.is_running() for rank in ranks)

    second = tmux("join", session, size=(160, 40), env=env)
    assert wait_for(lambda: app_lines(second) == before, 30), (before, second.screen())
    second.keys("F10")
    assert wait_for(lambda: in_panes(second, AT_10) == 2, 30), second.screen()


def test_two_terminals_share_the_app_and_one_hanging_up_ends_nothing(
    sessions: Sessions, tmux: type[Tmux], ddptui: Runner
) -> None:
    session = sessions.detach("--nproc-per-node", "2", STEPS)
    env = f"XDG_RUNTIME_DIR={sessions.runtime}"
    big = tmux("join", session, size=(160, 40), env=env)
    small = tmux("join", session, size=(120, 30), env=env)
    assert big.shows("(Pdb r1)") and small.shows("(Pdb r1)"), small.screen()
    small.keys("F10")  # typed in one terminal, seen in both
    assert wait_for(lambda: in_panes(big, AT_9) == 2, 30), big.screen()
    assert wait_for(lambda: in_panes(small, AT_9) == 2, 30), small.screen()
    assert max(len(line.rstrip()) for line in big.screen().splitlines()) <= 120  # the smaller size
    assert ddptui.run("sessions").stdout.endswith("  (shown in 2 terminals)\n")

    ranks = sessions.ranks(session)
    small.kill()  # its terminal goes away: SIGHUP to that `ddptui join`
    big.keys("F10")
    assert wait_for(lambda: in_panes(big, AT_10) == 2, 30), big.screen()
    assert all(rank.is_running() for rank in ranks)
    assert ddptui.run("sessions").stdout.endswith("  (shown in 1 terminal)\n")

    killed = ddptui.run("kill", session, timeout=60)
    assert killed.returncode == 0, killed.stderr
    assert big.exit_status(30) is not None
    assert big.shows("rank 0: "), big.screen()  # the summary, on the restored terminal
    assert gone(ranks)


def test_a_read_only_join_shows_the_app_and_types_nothing(sessions: Sessions, tmux: type[Tmux]) -> None:
    session = sessions.detach("--nproc-per-node", "2", STEPS)
    env = f"XDG_RUNTIME_DIR={sessions.runtime}"
    driver = tmux("join", session, size=(160, 40), env=env)
    watcher = tmux("join", "--read-only", session, size=(160, 40), env=env)
    assert driver.shows("(Pdb r1)") and watcher.shows("(Pdb r1)"), watcher.screen()
    watcher.keys("F10")  # not sent: the ranks stay at line 8
    driver.keys("F10")  # sent: both terminals see the step
    assert wait_for(lambda: in_panes(watcher, AT_9) == 2, 30), watcher.screen()
    printed = sessions.join("p value\n", session).stdout  # after every step sent before it
    assert "[rank 0] 1\n" in printed and "[rank 1] 11\n" in printed, printed  # one step, not two
    watcher.keys("C-d")
    assert watcher.exit_status() == 0
    assert watcher.shows(f"ddptui: detached from session {session}"), watcher.screen()
    driver.keys("F10")
    assert wait_for(lambda: in_panes(driver, AT_10) == 2, 30), driver.screen()


def test_quit_in_a_joined_app_ends_the_session_and_prints_the_summary_there(
    sessions: Sessions, tmux: type[Tmux]
) -> None:
    session = sessions.detach("--nproc-per-node", "2", STEPS)
    process = sessions.process(session)
    ranks = sessions.ranks(session)
    term = tmux("join", session, size=(160, 40), env=f"XDG_RUNTIME_DIR={sessions.runtime}")
    assert term.shows("(Pdb r1)"), term.screen()
    term.keys("C-q")
    assert term.shows("End 2 paused rank(s) and quit?"), term.screen()
    term.keys("y")
    assert term.exit_status(60) is not None, term.screen()
    assert term.shows("rank 1: paused at tests/scripts/steps.py:8 (ended by ddptui)"), term.screen()
    assert gone([process, *ranks])
    assert sessions.files() == []


def test_join_without_a_terminal_is_one_line(sessions: Sessions, ddptui: Runner) -> None:
    session = sessions.detach("--nproc-per-node", "1", STEPS)
    result = ddptui.run("join", session, stdin="")
    assert result.returncode == 2
    assert result.stderr == (
        "ddptui: error: ddptui join needs a terminal; ddptui join --batch FILE drives a session without one\n"
    )
    assert psutil.pid_exists(sessions.process(session).pid)


def test_a_session_started_in_a_terminal_can_be_left_and_joined_again(
    tmux: type[Tmux], ddptui: Runner
) -> None:
    runtime = ddptui.tmpdir / "xdg"
    runtime.mkdir(mode=0o700)
    env = f"XDG_RUNTIME_DIR={runtime}"
    term = tmux("--nproc-per-node", "2", STEPS, size=(160, 40), env=env)
    assert term.shows("(Pdb r1)"), term.screen()
    (entry,) = (runtime / "ddptui").glob("*.json")  # the session it runs in, which others may join
    session = entry.stem
    term.keys("F10")
    assert wait_for(lambda: in_panes(term, AT_9) == 2, 30), term.screen()
    term.keys("C-d")
    assert term.exit_status() == 0
    assert term.shows(f"ddptui: detached from session {session}: ddptui join {session} opens it again")
    again = tmux("join", session, size=(160, 40), env=env)
    assert wait_for(lambda: in_panes(again, AT_9) == 2, 30), again.screen()
    again.keys("C-q")
    assert again.shows("End 2 paused rank(s) and quit?"), again.screen()
    again.keys("y")
    assert again.exit_status(60) == 1
    assert again.shows("rank 1: paused at tests/scripts/steps.py:9 (ended by ddptui)"), again.screen()
    assert wait_for(lambda: not ddptui.leftovers(), 30), ddptui.leftovers()


def test_no_session_runs_the_app_in_its_terminal_and_ctrl_d_says_so(tmux: type[Tmux], ddptui: Runner) -> None:
    runtime = ddptui.tmpdir / "xdg"
    runtime.mkdir(mode=0o700)
    term = tmux("--no-session", "--nproc-per-node", "2", STEPS, env=f"XDG_RUNTIME_DIR={runtime}")
    assert term.shows("(Pdb r1)"), term.screen()
    assert not (runtime / "ddptui").exists() or not list((runtime / "ddptui").iterdir())
    term.keys("C-d")
    assert term.shows("it cannot be left running"), term.screen()


def test_a_job_that_ends_stays_on_the_screen_of_its_terminal_until_the_user_quits(
    tmux: type[Tmux], ddptui: Runner
) -> None:
    term = tmux("--nproc-per-node", "2", STEPS, size=(160, 40))
    assert term.shows("(Pdb r1)"), term.screen()
    term.keys("F5")  # c: both ranks run to their end
    assert term.shows("r0-1  exited 0"), term.screen()
    assert term.exit_status(3) is None  # still open, showing how the job ended
    term.keys("C-q")
    assert term.exit_status(60) == 0
    assert term.shows("rank 1: exited 0"), term.screen()
