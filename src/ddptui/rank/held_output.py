"""`HeldOutput`: pdb's stdout for a prompt that reads plain lines; a stop's text goes out in one write.

Between a stop and its prompt, pdb writes the location (`> train.py(12)step()`, `-> loss = ...`),
the rank's `paused` mark and the prompt: three writes to the terminal, each a wake-up of the
process that reads it (and on Linux of a kernel worker that moves pty bytes), on every rank at
every lockstep step. Held from the stop until the prompt is flushed, they are one write.

Only pdb's own text between a stop and its prompt is held: the debugger releases it before
anything else can print (a `display` expression, a queued command, the program resuming).
"""

from __future__ import annotations

import contextlib
import os
from typing import IO, Any


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

    def add(self, data: bytes) -> bool:
        """Hold raw bytes (the `paused` mark) in order with the text; False when not holding."""
        if self.holding:
            self._held.append(data)
        return self.holding

    def release(self) -> None:
        """Write what was held, in one write, and stop holding."""
        self.holding = False
        if not self._held:
            return
        data, self._held = b"".join(self._held), []
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()  # whatever the stream itself buffered comes first
            while data:
                data = data[os.write(1, data) :]

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
