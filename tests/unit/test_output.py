"""A rank's output log: absolute offsets, a cap, and an account of what the cap dropped."""

from ddptui.core.model.output import OutputLog


def test_nothing_dropped_under_the_cap() -> None:
    log = OutputLog(cap=16)
    log.append(b"hello ")
    log.append(b"world")
    assert log.since_with_gap(0) == (0, b"hello world")
    assert log.since_with_gap(6) == (0, b"world")
    assert log.since_with_gap(log.end) == (0, b"")


def test_dropped_bytes_are_counted_from_the_readers_offset() -> None:
    log = OutputLog(cap=10)
    log.append(b"0123456789")
    log.append(b"abcde")  # 15 > 10: keeps the last 5 (half the cap), drops 10
    assert log.start == 10 and log.end == 15
    assert log.since_with_gap(0) == (10, b"abcde")
    assert log.since_with_gap(4) == (6, b"abcde")
    assert log.since_with_gap(12) == (0, b"cde")


def test_dropped_plus_returned_covers_everything_since_the_offset() -> None:
    log = OutputLog(cap=64)
    printed = 0
    seen = 0
    for i in range(200):
        log.append(bytes([65 + i % 26]) * (i % 7 + 1))
        if i % 13 == 0:
            dropped, data = log.since_with_gap(printed)
            seen += dropped + len(data)
            printed = log.end
    dropped, data = log.since_with_gap(printed)
    assert seen + dropped + len(data) == log.end


def test_since_is_unchanged() -> None:
    log = OutputLog(cap=10)
    log.append(b"0123456789abcde")
    assert log.since(0) == b"abcde"
    assert log.since(13) == b"de"
    assert log.tail(2) == b"de"


def test_ends_with_looks_only_at_the_bytes_since_the_offset_and_past_the_cap() -> None:
    log = OutputLog(cap=10)
    log.append(b"0123456789abcde")  # the cap dropped "01234" and more: "abcde" is kept
    assert log.end == 15 and log.start == 10
    assert log.ends_with(b"cde", 12) and log.ends_with(b"de", 13)
    assert not log.ends_with(b"cde", 13)  # "c" is before the offset
    assert log.ends_with(b"abcde", 0)  # an offset already dropped means all that is kept
    log = OutputLog()
    log.append(b"n\r\n> x.py(3)\r\n(Pdb) ")
    assert log.ends_with(b"(Pdb) ", log.end - 6) and not log.ends_with(b"(Pdb) ", log.end - 5)
