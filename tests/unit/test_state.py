"""Rank states in words."""

from ddptui.core.state import Crash, Location, Phase, RankState


def test_describe() -> None:
    where = Location("/nowhere/train.py", 14, "<module>")
    assert RankState(Phase.PAUSED, where).describe() == "paused at train.py:14"
    assert (
        RankState(Phase.WAITING, where, waiting_in="all_reduce").describe()
        == "waiting at train.py:14 in all_reduce"
    )
    assert RankState(Phase.EXITED, exit_code=0).describe() == "exited 0"
    assert RankState(Phase.EXITED, exit_code=-9).describe() == "killed by SIGKILL"
    crash = Crash("NameError", "name 'c' is not defined", Location("/nowhere/train.py", 12))
    alive = RankState(Phase.PAUSED, where, crash=crash, post_mortem=True)
    assert alive.describe() == "crashed NameError: name 'c' is not defined (train.py:12), in post-mortem"
    ended = alive.evolve(exit_code=-15, ended_by_ddptui=True)
    assert ended.describe() == "crashed NameError: name 'c' is not defined (train.py:12) (ended by ddptui)"
    assert not ended.alive


def test_long_multiline_messages_are_cut() -> None:
    crash = Crash("RuntimeError", "x" * 500 + "\nsecond line", None)
    assert str(crash) == "RuntimeError: " + "x" * 157 + "..."
