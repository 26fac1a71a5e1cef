"""Rank states in words, reached through the typed transitions."""

from ddptui.core.model.state import Crash, Frame, Phase, RankState


def test_describe() -> None:
    where = Frame("/nowhere/train.py", 14, "<module>")
    assert RankState().paused(where, False).describe() == "paused at train.py:14"
    assert RankState().waiting(where, "all_reduce").describe() == "waiting at train.py:14 in all_reduce"
    assert RankState().exited(0).describe() == "exited 0"
    assert RankState().exited(-9).describe() == "killed by SIGKILL"
    crash = Crash("NameError", "name 'c' is not defined", Frame("/nowhere/train.py", 12))
    alive = RankState().crashed(crash).paused(where, True)
    assert alive.describe() == "crashed NameError: name 'c' is not defined (train.py:12), in post-mortem"
    ended = alive.ending().exited(-15)
    assert ended.describe() == "crashed NameError: name 'c' is not defined (train.py:12) (ended by ddptui)"
    assert not ended.alive


def test_fatal_signal_names_the_site() -> None:
    state = RankState().running().exited(-11, "at train.py:4 (in __init__)")
    assert state.phase is Phase.CRASHED
    assert state.describe() == "killed by SIGSEGV at train.py:4 (in __init__)"


def test_long_multiline_messages_are_cut() -> None:
    crash = Crash("RuntimeError", "x" * 500 + "\nsecond line", None)
    assert str(crash) == "RuntimeError: " + "x" * 157 + "..."


def test_active_means_a_live_rank_that_can_stall() -> None:
    where = Frame("/nowhere/train.py", 14, "<module>")
    assert RankState().active  # starting
    assert RankState().running().active
    assert RankState().waiting(where, "all_reduce").active
    assert not RankState().paused(where, False).active
    assert not RankState().running().exited(0).active
    assert not RankState().running().ending().exited(-15).active  # keeps its phase, but is gone
