"""The terminal of a rank's pdb prompt: how the prompt writes to it and reads from it.

`HeldOutput`: between a stop and its prompt, pdb writes the location (`> train.py(12)step()`,
`-> loss = ...`), the rank's `paused` mark and the prompt: three writes to the terminal, each a
wake-up of the process that reads it (and on Linux of a kernel worker that moves pty bytes), on
every rank at every lockstep step. Held from the stop until the prompt is flushed, they are one
write. Only pdb's own text between a stop and its prompt is held: the debugger releases it before
anything else can print (a `display` expression, a queued command, the program resuming).

`reading`: where a prompt reads its commands (plain lines where ddptui types them). The rest sets
the terminal up for a prompt: C's stdout buffered for readline, canonical mode for a prompt that
reads plain lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
import termios  # a small C module; asked at every plain prompt (an import statement there cost more)
from typing import IO, Any, NamedTuple

from ddptui.rank.link import link
from ddptui.rank.protocol import PLAIN_INPUT_ENV, PLAIN_UNTIL_EDITED


class HeldOutput:
    """Wraps the stream pdb writes to (fd 1, the terminal's); holds writes while `holding`."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._encoding = getattr(stream, "encoding", None) or "utf-8"
        self._errors = getattr(stream, "errors", None) or "strict"
        self._held: list[bytes] = []
        self.holding = False

    @classmethod
    def around(cls, stream: Any) -> Any:
        """`stream` wrapped, when it writes to this process's stdout (fd 1, where the `paused`
        mark goes); else `stream` itself."""
        inner = stream.stream if isinstance(stream, HeldOutput) else stream
        try:
            if inner.fileno() != 1:
                return stream
        except (AttributeError, ValueError, OSError):
            return stream
        return cls(inner)

    def hold(self) -> None:
        """Keep what is written from now on until `release` (or `flush`)."""
        self.holding = True

    def add(self, data: bytes) -> None:
        """Hold raw bytes (the `paused` mark) in order with the text held so far."""
        self._held.append(data)

    def release(self) -> None:
        """Write what was held, in one write, and stop holding."""
        self.holding = False
        if not self._held:
            return
        data, self._held = b"".join(self._held), []
        try:  # not contextlib.suppress: a context manager's object and two Python calls, every step
            self.stream.flush()  # whatever the stream itself buffered comes first
            while data:
                data = data[os.write(1, data) :]
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        """Write text, or hold it."""
        if self.holding:
            self._held.append(text.encode(self._encoding, self._errors))
            return len(text)
        return self.stream.write(text)

    def flush(self) -> None:
        """Release, then flush the stream: cmd.Cmd flushes right after writing the prompt."""
        self.release()
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:
        """Everything else is the stream's (encoding, fileno, isatty, ...)."""
        return getattr(self.stream, name)


def hold(stream: Any) -> None:
    """Hold pdb's text until the prompt is flushed (see `HeldOutput`); nothing without one."""
    if isinstance(stream, HeldOutput):
        stream.hold()


def release(stream: Any) -> None:
    """Write what pdb held, before anything else can print or the program goes on."""
    if isinstance(stream, HeldOutput):
        stream.release()


def say_paused(line: bytes, stream: Any, at_once: bool) -> None:
    """Send a `paused` line: on the link `at_once`, else as a mark with the prompt `stream` holds
    (it goes out with the prompt), else on the terminal now."""
    if at_once:
        link.send_line(line)
        return
    held = stream if isinstance(stream, HeldOutput) and stream.holding else None
    mark = link.mark(line) if held is not None else None
    if held is None or mark is None:
        link.paused(line)
    else:
        held.add(mark)


class Reading(NamedTuple):
    """Where a prompt reads its commands and writes its text (`reading`)."""

    stdin: Any
    stdout: Any
    use_rawinput: bool
    """`cmd.Cmd`'s switch: input() (readline), or self.stdin.readline()."""
    may_edit: bool
    """A prompt may read through readline."""
    ddptui_types: bool
    """Commands come from ddptui (`--batch`), or from ddptui unless keys were typed (`PromptInput`)."""


def reading(debugger: Any, stdin: Any, stdout: Any, use_rawinput: bool) -> Reading:
    """Read commands as plain lines where ddptui says so (`PLAIN_INPUT_ENV`); `debugger` is the
    pdb whose prompt a `PromptInput` may hand an `eval`."""
    how = os.environ.get(PLAIN_INPUT_ENV)
    ddptui_types = False
    if how == "1":
        use_rawinput = False
        ddptui_types = stdin is sys.stdin
    if how in ("1", PLAIN_UNTIL_EDITED):  # a prompt that can be handed an `eval` (`line_input`)
        from ddptui.rank.line_input import PromptInput

        stream = getattr(stdin, "stream", stdin)  # `debug` hands its PromptInput on
        if stream is sys.stdin and reads_terminal(stream):
            stdin = PromptInput(stream, debugger, history=how != "1")
            use_rawinput = False
            ddptui_types = True
    if not use_rawinput:  # cmd.Cmd writes the prompt to self.stdout and flushes it
        stdout = HeldOutput.around(stdout)
    return Reading(stdin, stdout, use_rawinput, how != "1", ddptui_types)


_prompt_buffer: object = None
"""C stdout's buffer once `buffer_prompts` gave it one (kept alive as long as the process)."""


def buffer_prompts() -> None:
    """Give C's stdout a line buffer when Python runs unbuffered (`-u`, PYTHONUNBUFFERED) on a terminal.

    Unbuffered, readline writes the prompt a byte a write: ten system calls a step, and as many
    wake-ups of whatever reads the terminal. Line-buffered is what C's stdout is on a terminal
    anyway; Python's own streams are not touched (they do not go through C's stdio). Once per
    process, at its first prompt; where C's `stdout` cannot be found, nothing changes.
    """
    global _prompt_buffer
    if _prompt_buffer is not None:
        return
    _prompt_buffer = False
    stream = sys.__stdout__
    if stream is None or not stream.write_through or not os.isatty(1):
        return
    import ctypes  # only ranks that show a prompt, once

    try:
        libc = ctypes.CDLL(None)
        buffer = ctypes.create_string_buffer(4096)
        if libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), buffer, 1, len(buffer)) == 0:  # _IOLBF
            _prompt_buffer = buffer
    except (OSError, ValueError, AttributeError):
        pass


def cook_terminal() -> list[Any] | None:
    """Make the terminal hand over lines, echoed, for a prompt that reads plain lines: a program
    may have left it raw (as a key-reading program does), which readline would not mind. Returns
    the settings to put back when the prompt closes; None when nothing changed (or no terminal)."""
    try:
        saved = termios.tcgetattr(0)
    except termios.error:
        return None
    iflag, lflag = saved[0] | termios.ICRNL, saved[3] | termios.ICANON | termios.ECHO
    if (iflag, lflag) == (saved[0], saved[3]):
        return None
    try:
        termios.tcsetattr(0, termios.TCSANOW, [iflag, saved[1], saved[2], lflag, *saved[4:]])
    except termios.error:
        return None
    return saved


def restore_terminal(saved: list[Any]) -> None:
    """Put back the settings `cook_terminal` changed."""
    with contextlib.suppress(termios.error):
        termios.tcsetattr(0, termios.TCSANOW, saved)


def reads_terminal(stream: Any) -> bool:
    """True when `stream` reads this process's terminal."""
    try:
        return stream.fileno() == 0 and os.isatty(0)
    except (AttributeError, ValueError, OSError):
        return False
