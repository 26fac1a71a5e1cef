"""`--batch` input: command lines from standard input or any readable file, pipes and FIFOs too."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import threading
from collections.abc import AsyncIterator, Callable

STDIN = "-"
"""The source name meaning standard input."""

MAX_LINE = 1 << 16
"""Longer lines arrive in pieces of this many bytes, so `--batch /dev/zero` cannot eat memory."""

_AHEAD = 64  # hand-offs read ahead of the batch: `yes n | ddptui --batch -` must not fill memory
_CHUNK = 256
"""Lines a regular file hands over at once. Each hand-off wakes the loop and the reading thread
once, a cost a small job's lockstep step would feel if every line were a hand-off of its own; a
pipe still hands over each line as it comes (a person or a program may be typing it)."""

_Item = list[str] | BaseException | None  # lines, why reading stopped, or None at the end


class BatchInputError(Exception):
    """A batch source that cannot be read; the message is one line for the user."""


def check_source(path: str) -> None:
    """Raise BatchInputError unless `path` (or `-`, standard input) can be read as a batch.

    Any kind of file that can be read is accepted: a regular file, a FIFO, a character device
    such as /dev/null, a pipe named /dev/fd/N by `<(...)` or /dev/stdin. Cheap and never blocks,
    so it can run before the ranks start.
    """
    if path == STDIN:
        _check_stdin()
        return
    try:
        info = os.stat(path)
    except OSError as exc:
        raise BatchInputError(_reason(path, exc)) from None
    if stat.S_ISDIR(info.st_mode):
        raise BatchInputError(f"batch file {path} is a directory")
    if stat.S_ISFIFO(info.st_mode):
        _check_fifo(path)
    else:
        _check_opens(path)


def _check_stdin() -> None:
    """Raise BatchInputError when there is no standard input at all (fd 0 closed)."""
    try:
        os.fstat(0)
    except OSError as exc:
        raise BatchInputError(_reason(STDIN, exc)) from None


def _check_fifo(path: str) -> None:
    """Check a FIFO by permission only.

    Opening it to check, then closing it, would let a writer waiting on the other end in only
    to find nobody reading: its next write gets SIGPIPE.
    """
    if not os.access(path, os.R_OK):
        raise BatchInputError(f"cannot read batch file {path}: Permission denied")


def _check_opens(path: str) -> None:
    """Open and close `path` without blocking (O_NONBLOCK) or taking a terminal (O_NOCTTY)."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC))
    except OSError as exc:
        raise BatchInputError(_reason(path, exc)) from None


def _reason(source: str, exc: OSError) -> str:
    """One line saying why `source` cannot be read."""
    if isinstance(exc, FileNotFoundError) and source != STDIN:
        return f"no such batch file: {source}"
    what = "standard input" if source == STDIN else f"batch file {source}"
    return f"cannot read {what}: {exc.strerror or exc}"


async def lines(source: str, on_wait: Callable[[], object] | None = None) -> AsyncIterator[str]:
    """The lines of `source` (`-` = standard input), without their `\\n` or `\\r\\n`;
    `on_wait()` is called whenever no line is ready (what was put off for the next line is due).

    Read on a daemon thread, opened there too: opening a FIFO waits for a writer and reading
    waits for a line, and neither may hold up the asyncio loop or the process's exit.

    Bytes that are not UTF-8 become U+FFFD (errors="replace") rather than surrogates
    (surrogateescape): every line is then a plain str that prints and encodes anywhere (the
    transcript, a rank's pty), and the user sees where their file was damaged.

    Raises:
        BatchInputError: the source cannot be opened or read (at the point it failed).
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    room = threading.Semaphore(_AHEAD)

    def put(item: _Item) -> bool:
        """Hand one item to the loop; False once the loop is gone and nobody reads any more."""
        room.acquire()
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # loop closed: the batch ended while this thread waited
            return False
        return True

    threading.Thread(target=_read, args=(source, put), daemon=True, name="ddptui-batch").start()
    while True:
        if on_wait is not None and queue.empty():
            on_wait()
        if (item := await queue.get()) is None:
            break
        room.release()
        if isinstance(item, BaseException):
            raise item
        for line in item:
            yield line


def _read(source: str, put: Callable[[_Item], bool]) -> None:
    """The reading thread: every line, then None or the error; it must never end silently."""
    try:
        if not _read_lines(source, put):
            return
    except OSError as exc:
        put(BatchInputError(_reason(source, exc)))
    except Exception as exc:  # a bug here must end the batch, not leave it waiting forever
        put(BatchInputError(f"reading {source}: {exc!r}"))
    else:
        put(None)


def _read_lines(source: str, put: Callable[[_Item], bool]) -> bool:
    """Put every line of `source` (a regular file's `_CHUNK` at a time); False if the reader
    went away first. Lines read before an error are put before it."""
    with _open(source) as stream:
        size = _CHUNK if stat.S_ISREG(os.fstat(stream.fileno()).st_mode) else 1
        lines: list[str] = []
        try:
            while chunk := stream.readline(MAX_LINE):
                lines.append(chunk.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r"))
                if len(lines) >= size:
                    if not put(lines):
                        return False
                    lines = []
        except OSError:
            if lines:
                put(lines)
            raise
    return not lines or put(lines)


def _open(source: str) -> io.BufferedReader:
    """`source` opened for binary reading; standard input is read through fd 0, left open."""
    if source == STDIN:
        return open(0, "rb", closefd=False)
    return open(source, "rb")
