"""`MarkReader`: the `paused` a rank says in its terminal, taken out of its output, and nothing else."""

from __future__ import annotations

import pytest

from ddptui.core.model import marks
from ddptui.core.model.marks import MarkReader
from ddptui.rank.protocol import MARK_END, MARK_INTRO, MAX_MARK, Frame, Paused

KEY = b"k" * 24
PAUSED = Paused(Frame("/tmp/train.py", 12, "<module>"), depth=1)


def mark(message: Paused = PAUSED, key: bytes = KEY) -> bytes:
    """The bytes a rank writes (see `Link.paused`)."""
    return MARK_INTRO + key + b";" + message.encode()[:-1] + MARK_END


def read(chunks: list[bytes], key: bytes = KEY) -> tuple[bytes, list[object]]:
    """(all output, the events) of feeding `chunks`, then the end."""
    reader = MarkReader(key)
    output, events = b"", []
    for chunk in chunks:
        data, said = reader.feed(chunk)
        output += data
        events += said
    return output + reader.flush(), events


STREAM = b"\x1b[31mloss 0.5\x1b[0m\r\n> train.py(12)<module>()\r\n" + mark() + b"(Pdb r0) "


def test_a_mark_becomes_an_event_and_leaves_the_output() -> None:
    """The output around the mark is kept whole, in order; the mark is the event."""
    assert read([STREAM]) == (STREAM.replace(mark(), b""), [PAUSED])


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 64])
def test_reads_of_any_size_give_the_same_output_and_events(size: int) -> None:
    """A mark cut anywhere by a read is held until the rest arrives."""
    stream = STREAM * 3
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    assert read(chunks) == read([stream])
    assert read(chunks)[1] == [PAUSED] * 3


@pytest.mark.parametrize(
    "fake",
    [
        mark(key=b"x" * 24),  # another key: anything a program prints, replayed logs included
        mark(key=b""),
        MARK_INTRO + KEY + b';{"k":"paused","frame":"nowhere"}' + MARK_END,
        MARK_INTRO + KEY + b';{"k":"exited","code":0}' + MARK_END,  # only `paused` travels this way
        MARK_INTRO + KEY + b";\xff\xfe not json" + MARK_END,
        MARK_INTRO + KEY + b";" + MARK_END,
    ],
)
def test_anything_else_that_looks_like_a_mark_is_output_as_printed(fake: bytes) -> None:
    """Hostile or stray bytes are data: passed on untouched, never an event."""
    stream = b"before " + fake + b" after" + mark()
    output, events = read([stream])
    assert output == b"before " + fake + b" after"
    assert events == [PAUSED]
    alone = b"before " + fake + b" after"  # the read's only mark, then plain text: as a prompt is
    assert read([alone]) == (alone, [])


def test_a_mark_that_never_ends_is_output_once_it_is_too_long() -> None:
    """Nothing is held for ever: an unended intro longer than a mark can be is output."""
    reader = MarkReader(KEY)
    start = MARK_INTRO + KEY + b";" + b"a" * 100
    assert reader.feed(start) == (b"", [])  # could still be a mark
    rest = b"b" * MAX_MARK
    assert reader.feed(rest) == (start + rest, [])
    assert reader.flush() == b""


def test_what_is_held_when_the_output_ends_is_output() -> None:
    """A rank that exits right after an escape's first byte loses nothing."""
    reader = MarkReader(KEY)
    assert reader.feed(b"done\x1b") == (b"done", [])  # could be a mark's first byte
    assert reader.flush() == b"\x1b"
    assert reader.feed(b"\x1b[0m") == (b"\x1b[0m", [])  # a complete escape that is not one


def test_without_a_key_no_mark_is_an_event() -> None:
    """A reader not given the session's key yet believes nothing, an empty key included."""
    for stream in (mark(key=b""), mark()):
        assert MarkReader(b"").feed(stream) == (stream, [])


def test_output_without_marks_is_passed_through_as_one_part() -> None:
    """The common case costs one search: the chunk comes back as it is."""
    data = b"x" * 70000 + b"\x1b[0m"
    output, events = MarkReader(KEY).feed(data)
    assert output is data and events == []


def test_a_body_read_before_gives_the_same_answer_and_the_memo_stays_bounded() -> None:
    """Bodies are decoded once and remembered (ranks in lockstep say the same `paused`), events and
    non-events alike, and the memo is emptied before it outgrows its bound."""
    fake = MARK_INTRO + KEY + b';{"k":"exited","code":0}' + MARK_END
    for _ in range(2):
        assert read([fake + mark()]) == (fake, [PAUSED])
    for line in range(marks._DECODED_MAX + 10):
        moved = Paused(Frame("/tmp/train.py", line, "<module>"))
        assert read([mark(moved)])[1] == [moved]
        assert len(marks._DECODED) <= marks._DECODED_MAX
