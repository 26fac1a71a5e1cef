"""`PromptInput`: pdb's input for a rank ddptui types into. Plain lines, readline when a user types.

A command ddptui sends (a broadcast) is read as the plain line the terminal's line discipline
hands over: one read, no terminal set-up. readline (history, completion, editing keys) costs
about 40 % of a rank's CPU a step, and is only wanted when a person types into the rank's pane.
So the core asks for it (the `edit` request) before it forwards the first key typed at a prompt:
a plain read in progress is woken and becomes a readline prompt, drawn over the one on screen,
and the core is answered once readline has the terminal. One prompt at a time: the next command
is read plainly again unless the core asks again.

The same wake-up hands the main thread work while it waits at a plain prompt (`hand_over`): an
`eval` request runs there, where a signal can stop it, as pdb's own `p` would run.
"""

from __future__ import annotations

import cmd
import codecs
import contextlib
import os
import re
import select
import sys
import threading
from collections.abc import Callable
from typing import IO

EDIT_WAIT = 1.0
"""Seconds the `edit` request waits for an open plain prompt to become a readline prompt."""

_lock = threading.Lock()
"""Guards the two below and `_answers`: a plain `Lock`, taken twice a step on the main thread (a
`Condition`'s enter, exit and notify are Python code, which every step would pay, on cold caches
when many ranks share few cores)."""
_wanted = False
"""The core asked for line editing, for the prompt that is open or the next one."""
_reading = ""
"""What the main thread does: "" (not reading a command), "plain", "working" (work handed over
at a plain prompt), "switching" or "editing"."""
_work: list[Callable[[], None]] = []
"""Work handed to the main thread at its plain prompt (`hand_over`), run before the next read."""
_arrivals: list[threading.Event] = []
"""`hand_over` calls waiting for the main thread to come to its plain read."""
_answers: list[threading.Event] = []
"""`edit` requests waiting for the open plain prompt to become a readline prompt (or to end)."""
_wake_read, _wake_write = os.pipe()
os.set_blocking(_wake_write, False)
_history_seen: tuple[int, str] = (0, "")
"""readline's history length and the command last read plainly, once it is history's last line:
the same command again is not looked up (a history item is decoded through the locale)."""
_LINE_ENDS = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def edit() -> bool:
    """`edit`: read the current (or next) command through readline; answered once readline reads.

    True when readline has the terminal now (false: no prompt is open yet, or this rank reads
    through readline anyway).
    """
    global _wanted
    answered = threading.Event()
    with _lock:
        _wanted = True
        with contextlib.suppress(BlockingIOError):  # a full pipe wakes the prompt all the same
            os.write(_wake_write, b".")
        waits = _reading in ("plain", "working", "switching")
        if waits:
            _answers.append(answered)
    if waits:
        answered.wait(EDIT_WAIT)
    with _lock:
        if answered in _answers:
            _answers.remove(answered)
        return _reading == "editing"


def hand_over(work: Callable[[], None], wait: float = 0.0) -> bool:
    """Have the main thread call `work` (which must not raise) at the plain prompt it waits at.

    False, and nothing handed over, when it does not wait at one now or within `wait` seconds
    (a prompt the core saw open can be a moment from its read): it runs the program or a
    command, or reads through readline. Handed over, `work` runs before the prompt reads another
    command (after the work handed over before it): a command already typed (`c`) waits until
    `work` returns.
    """
    arrived = threading.Event()
    with _lock:
        if _take(work):
            return True
        if not wait:
            return False
        _arrivals.append(arrived)
    arrived.wait(wait)
    with _lock:
        if arrived in _arrivals:
            _arrivals.remove(arrived)
        return _take(work)


def _take(work: Callable[[], None]) -> bool:
    """Queue `work` for the main thread and wake it, if it reads plainly (`_lock` held)."""
    if _reading not in ("plain", "working"):
        return False
    _work.append(work)
    with contextlib.suppress(BlockingIOError):  # a full pipe wakes the prompt all the same
        os.write(_wake_write, b".")
    return True


class PromptInput:
    """pdb's `stdin` (`readline()` is all `cmd.Cmd` calls) while ddptui may type into the rank."""

    def __init__(self, stream: IO[str], debugger: cmd.Cmd, history: bool = True) -> None:
        """Read `stream` (the terminal) for `debugger`, whose prompt and completer a readline
        prompt uses; `history`: keep the commands read plainly in readline's history (for Up in
        a pane: not where only ddptui types)."""
        self.stream = stream
        self.history = history
        self.debugger = debugger
        self._fd = stream.fileno()
        self._decoder = codecs.getincrementaldecoder(getattr(stream, "encoding", None) or "utf-8")("replace")
        self._lines: list[str] = []
        """Lines read but not yet handed over (a read can hold more than one)."""
        self._whole = True
        """The last read ended at a line's end: the decoder holds no part of a character."""
        self.typed = False
        """The last command was typed into the rank's pane (read through readline), not sent by ddptui."""
        self._ready = select.poll()
        """The terminal and the wake-up pipe, registered once (a `select` call builds its sets anew)."""
        self._ready.register(self._fd, select.POLLIN)
        self._ready.register(_wake_read, select.POLLIN)

    def readline(self) -> str:
        """The next command, with its newline ("" at the end of input)."""
        global _wanted, _reading
        if self._lines:
            return self._lines.pop(0)
        while True:
            work = None
            with _lock:
                if _work:
                    work = _work[:]
                    _work.clear()
                    _reading = "working"
                elif _wanted:
                    _wanted, _reading = False, "switching"
                    break
                else:
                    _reading = "plain"
                    if _arrivals:  # nearly never: work waits for this read
                        for arrived in _arrivals:
                            arrived.set()
                        _arrivals.clear()
            if work:
                for each in work:
                    each()
                continue
            try:
                ready = self._ready.poll()
            except BaseException:  # Ctrl-C: pdb's KeyboardInterrupt
                _now_reading("")
                raise
            if ready[0][0] == self._fd or len(ready) > 1:  # the terminal has input (the pipe may too)
                with _lock:  # (as `_now_reading("")`, inline: once a step)
                    if _work:
                        continue  # work handed over meanwhile runs first: `hand_over` takes this lock
                    _reading = ""
                    answers = _answers[:] if _answers else None
                    _answers.clear()
                if answers:
                    for answered in answers:
                        answered.set()
                self.typed = False
                return self._plain()
            os.read(_wake_read, 512)  # still reading: the loop's top runs the work or switches to readline
        self.typed = True
        try:
            return self._edited()
        finally:
            _now_reading("")  # done reading: an `edit` waiting for the prompt is answered

    def _plain(self) -> str:
        """A line as the terminal hands it over, kept in readline's history for Up in a pane."""
        global _history_seen
        try:
            data = os.read(self._fd, 65536)
        except OSError:  # EIO: the terminal hung up (ddptui is gone); pdb takes it as the end of input
            return ""
        if not data:
            return ""
        if data.isascii() and data.find(b"\n") == len(data) - 1 and b"\r" not in data and self._whole:
            line = data.decode()  # nearly always: one command, as the terminal hands it over
        else:
            self._lines = _LINE_ENDS.findall(self._decoder.decode(data))
            self._whole = data.endswith((b"\n", b"\r"))
            if not self._lines:  # part of a character: the rest comes with the line's end
                return self._plain()
            line = self._lines.pop(0)
        if not self.history:
            return line
        readline = sys.modules.get("readline")
        command = line.rstrip("\r\n")
        if readline is not None and command and not command.isspace():
            length = readline.get_current_history_length()
            if (length, command) != _history_seen:  # not the line just kept (`n` again and again)
                if not length or readline.get_history_item(length) != command:
                    readline.add_history(command)
                _history_seen = (readline.get_current_history_length(), command)
        return line

    def _edited(self) -> str:
        """A line read through readline, its prompt drawn over the plain one already shown.

        Where `input()` would not use readline (the program swapped `sys.stdout`), a plain line.
        """
        if not (sys.stdin is sys.__stdin__ and sys.stdout is sys.__stdout__ and os.isatty(1)):
            return self._plain()
        import readline

        old_completer = readline.get_completer()
        readline.set_completer(self.debugger.complete)  # type: ignore[arg-type]  # it returns one match, as readline wants
        readline.parse_and_bind("tab: complete")
        readline.set_pre_input_hook(_editing)
        try:  # \001 \002 around the carriage return: it takes no column of the prompt
            return input(f"\001\r\002{self.debugger.prompt}") + "\n"
        except EOFError:
            return ""
        finally:
            readline.set_pre_input_hook(None)
            readline.set_completer(old_completer)


def _editing() -> None:
    """readline's pre-input hook: it has the terminal now, so the core may forward the keys."""
    _now_reading("editing")


def _now_reading(what: str) -> None:
    """Say what the main thread does now, and answer the `edit` requests that wait for it."""
    global _reading
    with _lock:
        _reading = what
        if not _answers:  # nearly always: no `edit` waits
            return
        answers = _answers[:]
        _answers.clear()
    for answered in answers:
        answered.set()
