"""Rank lists, `@` prefixes and `:` commands."""

import pytest

from ddptui.core.model.targets import (
    Line,
    TargetError,
    by_words,
    format_ranks,
    name_ranks,
    parse_line,
    parse_ranks,
)


def test_parse_ranks() -> None:
    assert parse_ranks("0,2-3", 4) == {0, 2, 3}
    assert parse_ranks(" all ", 3) == {0, 1, 2}
    assert parse_ranks("1,1,0-1", 2) == {0, 1}


@pytest.mark.parametrize("text", ["", "x", "3-1", "-1", "0,7", "1-", ","])
def test_bad_rank_lists(text: str) -> None:
    with pytest.raises(TargetError):
        parse_ranks(text, 4)


def test_format_ranks() -> None:
    assert format_ranks({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert format_ranks(frozenset({3})) == "3"
    assert (name_ranks({3}), name_ranks({0, 2, 3})) == ("rank 3", "ranks 0,2-3")
    assert name_ranks(rank for rank in [2, 2, 2]) == "rank 2"  # any iterable; each rank once


def test_by_words_groups_ranks_that_say_the_same() -> None:
    said = [(0, "at b.py:3"), (1, "at a.py:9"), (2, "at a.py:9"), (3, "at a.py:9"), (5, "at a.py:9")]
    assert by_words(said) == [("rank 0", "at b.py:3"), ("ranks 1-3,5", "at a.py:9")]
    assert by_words([]) == []


def test_parse_line() -> None:
    assert parse_line("  n ", 2) == Line("pdb", "n")
    assert parse_line("@1 p x + 1", 2) == Line("pdb", "p x + 1", frozenset({1}))
    assert parse_line(" @1  p x ", 2).echo == "@1  p x"  # as typed
    assert Line("pdb", "n").echo == "n"  # a key's command (F10)
    assert parse_line(":ranks 0", 2) == Line("ddptui", "ranks 0")
    assert parse_line("   ", 2).kind == "empty"
    with pytest.raises(TargetError, match="no command after @0"):
        parse_line("@0", 2)
