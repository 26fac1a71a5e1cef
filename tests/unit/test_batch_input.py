"""Batch input: every readable kind of file, bad bytes, FIFOs that never block the loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ddptui.core.commands import batch_input
from ddptui.core.commands.batch_input import BatchInputError, check_source, lines


async def collect(source: str, timeout: float = 10.0) -> list[str]:
    """Every line of `source`, failing the test rather than hanging."""

    async def read() -> list[str]:
        """The lines, in order."""
        return [line async for line in lines(source)]

    return await asyncio.wait_for(read(), timeout)


def write_later(path: Path, data: bytes, delay: float = 0.2) -> threading.Thread:
    """Open `path` for writing after `delay` (a FIFO waits for this), write `data`, close."""

    def writer() -> None:
        """Write once the reader has had time to start waiting."""
        time.sleep(delay)
        with open(path, "wb") as out:
            out.write(data)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    return thread


# -- check_source ---------------------------------------------------------------------------


def test_check_accepts_every_readable_kind(tmp_path: Path) -> None:
    regular = tmp_path / "cmds"
    regular.write_text("n\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read_end, write_end = os.pipe()
    try:
        for path in (str(regular), str(fifo), "/dev/null", f"/dev/fd/{read_end}", "-"):
            check_source(path)  # a FIFO with no writer must not block here
    finally:
        os.close(read_end)
        os.close(write_end)


def test_check_does_not_open_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    opened = threading.Event()

    def writer() -> None:
        """Wait for a reader the way `echo n > fifo` does."""
        fd = os.open(fifo, os.O_WRONLY)
        opened.set()
        os.close(fd)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.1)
    check_source(str(fifo))
    # Had the check opened the FIFO, the writer would be through, writing to a closed pipe.
    assert not opened.wait(0.3)
    os.close(os.open(fifo, os.O_RDONLY))  # let the writer go
    thread.join(5)


def test_check_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(BatchInputError, match=r"no such batch file: .*nope"):
        check_source(str(tmp_path / "nope"))


def test_check_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BatchInputError, match="is a directory"):
        check_source(str(tmp_path))


def test_check_refuses_a_path_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(BatchInputError, match="Not a directory"):
        check_source(str(tmp_path / "file" / "x"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_check_refuses_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("n\n")
    path.chmod(0)
    with pytest.raises(BatchInputError, match="Permission denied"):
        check_source(str(path))


# -- lines ------------------------------------------------------------------------------------


async def test_lines_of_a_file_without_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "cmds"
    path.write_bytes(b"n\r\np x\n\nc")
    assert await collect(str(path)) == ["n", "p x", "", "c"]


async def test_a_long_file_arrives_whole_and_in_order(tmp_path: Path) -> None:
    """A regular file hands its lines over in chunks (`_CHUNK`); none is lost at their seams."""
    expected = [f"p {i}" for i in range(2 * batch_input._CHUNK + 7)]
    path = tmp_path / "cmds"
    path.write_text("".join(f"{line}\n" for line in expected))
    assert await collect(str(path)) == expected


async def test_a_pipe_hands_each_line_over_as_it_comes() -> None:
    """What a person or a program types into a pipe runs at once, not when a chunk fills."""
    read_end, write_end = os.pipe()
    reading = lines(f"/dev/fd/{read_end}")
    try:
        os.write(write_end, b"n\n")
        assert await asyncio.wait_for(reading.__anext__(), 10) == "n"  # the writer is still there
        os.write(write_end, b"c\n")
        assert await asyncio.wait_for(reading.__anext__(), 10) == "c"
        os.close(write_end)
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(reading.__anext__(), 10)
    finally:
        await reading.aclose()
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.close(write_end)


async def test_dev_null_has_no_lines() -> None:
    assert await collect("/dev/null") == []


async def test_invalid_utf8_is_replaced_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "cmds"
    path.write_bytes(b"n\n\xff\xfe p \xc3(\nc\n")
    assert await collect(str(path)) == ["n", "\ufffd\ufffd p \ufffd(", "c"]


async def test_a_fifo_waits_for_its_writer_without_blocking_the_loop(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reading = asyncio.ensure_future(collect(str(fifo)))
    ticks = 0
    for _ in range(10):  # the loop keeps running while the reader waits for a writer
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 10 and not reading.done()
    writer = write_later(fifo, b"n\n\x80\nc\n", delay=0)
    assert await reading == ["n", "\ufffd", "c"]
    writer.join(5)


async def test_a_pipe_named_by_dev_fd() -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"n\nc\n")
    os.close(write_end)
    try:
        assert await collect(f"/dev/fd/{read_end}") == ["n", "c"]
    finally:
        os.close(read_end)


async def test_a_missing_file_raises_batch_input_error(tmp_path: Path) -> None:
    with pytest.raises(BatchInputError, match="no such batch file"):
        await collect(str(tmp_path / "gone"))


async def test_a_directory_raises_batch_input_error(tmp_path: Path) -> None:
    with pytest.raises(BatchInputError, match="Is a directory"):
        await collect(str(tmp_path))


async def test_overlong_lines_arrive_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_input, "MAX_LINE", 4)
    path = tmp_path / "cmds"
    path.write_bytes(b"abcdefghij\nn\n")
    assert await collect(str(path)) == ["abcd", "efgh", "ij", "n"]


async def test_endless_input_is_read_only_a_little_ahead() -> None:
    seen = 0
    async for _ in lines("/dev/zero"):  # no newline ever: MAX_LINE pieces, read on demand
        seen += 1
        if seen == 3:
            break
    assert seen == 3


# -- in a process of its own: real standard input, real exit -------------------------------

STDIN_SCRIPT = """
import asyncio, sys
from ddptui.core.commands.batch_input import check_source, lines
async def main():
    check_source(sys.argv[1])
    print(ascii([line async for line in lines(sys.argv[1])]))
asyncio.run(main())
"""


@pytest.mark.parametrize("source", ["-", "/dev/stdin"])
def test_piped_standard_input_with_bad_bytes(source: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", STDIN_SCRIPT, source],
        input=b"n\n\xff bad\nc\n",
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == "['n', '\\ufffd bad', 'c']"


EXIT_SCRIPT = """
import asyncio, sys
from ddptui.core.commands.batch_input import lines
async def main():
    reading = asyncio.ensure_future(anext(lines(sys.argv[1])))
    await asyncio.sleep(0.3)
    reading.cancel()
asyncio.run(main())
print("exited")
"""


def test_a_fifo_without_writer_does_not_hold_up_exit(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(fifo)], capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == "exited"
    assert result.stderr == b""
