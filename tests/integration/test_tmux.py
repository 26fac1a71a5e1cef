"""The app in a real terminal (tmux), driven the way a new user would drive it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from conftest import EXAMPLES, SCRIPTS, Runner, wait_for
from terminal import Tmux, app_process, needs_tmux, tmux_fixture  # noqa: F401  (the fixture)

pytestmark = needs_tmux


def test_new_user_walkthrough(tmux: type[Tmux], ddptui: Runner) -> None:
    term = tmux("--nproc-per-node", "2", str(EXAMPLES / "train_ddp.py"))
    assert term.shows("(Pdb r0)") and term.shows("(Pdb r1)"), term.screen()
    term.keys("F10")
    stepped = "-> loss = torch.nn.functional.mse_loss(out, y)"
    in_panes = lambda: term.screen().count(stepped) - term.screen().count(f"] {stepped}")  # noqa: E731 (not the log)
    assert wait_for(lambda: in_panes() == 2, 30), term.screen()
    term.keys("F2")
    assert term.shows("BROADCAST → all", 5)
    term.keys('p int(os.environ["RANK"])', "Enter")
    assert wait_for(
        lambda: any(line.startswith("│0 ") and "││1 " in line for line in term.screen().splitlines()), 30
    ), term.screen()
    term.keys("q", "Enter")
    assert term.shows("End 2 paused rank(s) and quit?", 5)
    term.keys("y")
    assert term.exit_status() == 1
    assert wait_for(lambda: not ddptui.leftovers(), 5)
    assert "rank 0: paused at examples/train_ddp.py:29 (ended by ddptui)" in term.screen()


def test_quitting_many_ranks_prints_one_line_per_state(tmux: type[Tmux], ddptui: Runner) -> None:
    """Above the grid threshold the exit summary groups ranks: 63 lines of `waiting at` for a
    64-rank job that hangs were one line's worth of news."""
    script = str(SCRIPTS / "plain_barrier.py")
    term = tmux("--nproc-per-node", "12", "--stall-timeout", "1", script, "--crash", "5")
    assert term.shows("r0-11  paused", 90), term.screen()
    term.keys("F5")
    assert term.shows("r1-4,6-11  waiting", 60), term.screen()
    term.keys("C-q")
    assert term.shows("and quit?", 5), term.screen()
    term.keys("y")
    assert term.exit_status() is not None
    assert wait_for(lambda: not ddptui.leftovers(), 5)
    lines = [line.rstrip() for line in term.screen().splitlines() if line.startswith("rank")]
    at = "tests/scripts/plain_barrier.py"
    assert lines == [
        f"rank 0: waiting at {at}:34 in accept (ended by ddptui)",
        f"ranks 1-4,6-11: waiting at {at}:40 (ended by ddptui)",
        f"rank 5: crashed ValueError: rank 5 never reaches the barrier ({at}:48) (ended by ddptui)",
    ], term.screen()


def test_closing_the_terminal_ends_everything(tmux: type[Tmux], ddptui: Runner) -> None:
    term = tmux("--nproc-per-node", "2", str(EXAMPLES / "rank0_set_trace.py"))
    assert term.shows("(Pdb r0)"), term.screen()
    term.kill()  # the terminal goes away under ddptui (SIGHUP, then no tty at all)
    assert wait_for(lambda: not ddptui.leftovers(), 10.0), ddptui.leftovers()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_app_killed_leaves_nothing_running(tmux: type[Tmux], ddptui: Runner, sig: signal.Signals) -> None:
    term = tmux("--nproc-per-node", "2", str(SCRIPTS / "children.py"))
    assert term.shows("(Pdb r1)"), term.screen()
    app_process(ddptui).send_signal(sig)
    assert wait_for(lambda: not ddptui.leftovers(), 10.0), ddptui.leftovers()
    assert list(Path(ddptui.tmpdir).glob("ddptui-*")) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_app_ended_by_a_signal_prints_every_ranks_state(
    tmux: type[Tmux], ddptui: Runner, sig: signal.Signals
) -> None:
    term = tmux("--nproc-per-node", "2", str(SCRIPTS / "steps.py"))
    assert term.shows("(Pdb r1)"), term.screen()
    app_process(ddptui).send_signal(sig)
    assert term.exit_status() == 1
    assert term.shows("rank 1: paused at tests/scripts/steps.py:8 (ended by ddptui)", 5), term.screen()


def test_a_hang_up_with_the_terminal_still_there_restores_it_and_says_why(
    tmux: type[Tmux], ddptui: Runner
) -> None:
    term = tmux("--nproc-per-node", "2", str(SCRIPTS / "steps.py"))
    assert term.shows("(Pdb r1)"), term.screen()
    app_process(ddptui).send_signal(signal.SIGHUP)
    assert term.exit_status() == 128 + signal.SIGHUP
    assert term.shows("rank 1: paused at tests/scripts/steps.py:8 (ended by ddptui)", 5), term.screen()
    before, after = term.stty
    assert wait_for(after.exists, 5) and after.read_text() == before.read_text()
    flags = "#{alternate_on} #{cursor_flag} #{mouse_any_flag} #{mouse_button_flag} #{mouse_sgr_flag}"
    assert term.tmux("display-message", "-p", flags).split() == ["0", "1", "0", "0", "0"]
    assert wait_for(lambda: not ddptui.leftovers(), 10.0), ddptui.leftovers()
