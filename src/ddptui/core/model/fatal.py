"""Say where a rank died of a fatal signal: `at train.py:4 (in DistributedDataParallel.__init__)`.

The rank writes a faulthandler dump when it dies (`ddptui.rank.fatal.install`); this reads it:

    Fatal Python error: Segmentation fault

    Thread 0x00007ff1988b96c0 (most recent call first):
      File ".../threading.py", line 982 in run
      ...
    Current thread 0x00007ff19945fb80 (most recent call first):
      File ".../torch/nn/parallel/distributed.py", line 1079 in __init__
      File "/home/me/train.py", line 4 in <module>
"""

from __future__ import annotations

import ast
import re
import tokenize
from dataclasses import dataclass

from ddptui.core.model.stacks import Frame, blocked_at, main_thread, parse_threads
from ddptui.core.model.state import short_path
from ddptui.core.model.text import terminal_lines

_FATAL_ERROR = "Fatal Python error: "
_CURRENT_THREAD = re.compile(r"^Current thread 0x[0-9a-f]+", re.MULTILINE)
_THROWN = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']+)'")
_WHAT = re.compile(r"^\s*what\(\):\s+(?P<what>\S.*)$")
DEATH_TAIL = 65536
"""Bytes of a dead rank's terminal read for its death: the dump of a few dozen threads fits."""
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def fatal_site(dump: str) -> str | None:
    """Where the thread that died was: its innermost user frame and the library call it was in.

    `at train.py:4 (in DistributedDataParallel.__init__)`; `at train.py:4` when the user's own
    line made the fatal call (`os.abort()`); `in _ddp_init_helper (torch/nn/parallel/
    distributed.py:1473)` when no user frame is on the stack. None for an empty dump or a thread
    without Python frames (a crash in a C++ thread): better nothing than another thread's line.
    """
    frames = crashed_thread(dump)
    return stack_site(frames) if frames else None


def stack_site(frames: list[Frame]) -> str:
    """`at train.py:4 (in DistributedDataParallel.__init__)` for a stack (innermost first), as
    `fatal_site` says it."""
    user, call = blocked_at(frames)
    if user is None:
        return f"in {qualified_name(frames[0])} ({library_path(frames[0].file)}:{frames[0].line})"
    callee = library_call(frames[: frames.index(user)], call)
    return f"at {user} (in {qualified_name(callee)})" if callee else f"at {user}"


def crashed_thread(dump: str) -> list[Frame]:
    """The frames (innermost first) of the thread that died, from the last fatal error in `dump`.

    The last: forked children (DataLoader workers) share the dump file, and the rank's own dump
    is written when it dies, after theirs. faulthandler marks the dying thread `Current thread`,
    and lists it wherever it falls among the others.
    """
    start = dump.rfind(_FATAL_ERROR)
    current = _CURRENT_THREAD.search(dump, max(start, 0))
    if current is None:
        return []
    threads = parse_threads(dump[current.start() :])
    return threads[0] if threads else []


def library_call(callees: list[Frame], name: str | None) -> Frame | None:
    """The frame of the library call `name` (as `stacks.blocked_at` names it) among `callees`.

    Of the frames with that name, the outermost: the call the user's line made, not a recursion
    inside it.
    """
    return next((frame for frame in reversed(callees) if frame.func == name), None)


def qualified_name(frame: Frame) -> str:
    """`DistributedDataParallel.__init__` for `__init__` at distributed.py:1079; else the bare name.

    faulthandler writes only the function's name (`co_name`): the class comes from the source,
    the scopes around that line. The name found must equal the dumped one, so a file edited
    since the crash, a lambda or a comprehension gives the bare name, never a wrong one.
    """
    try:
        with tokenize.open(frame.file) as source:
            tree = ast.parse(source.read(), frame.file)
    except (OSError, SyntaxError, ValueError):
        return frame.func
    scopes = scopes_at(tree, frame.line)
    if not scopes or scopes[-1].name != frame.func:
        return frame.func
    parts = [s.name if isinstance(s, ast.ClassDef) else f"{s.name}.<locals>" for s in scopes[:-1]]
    return ".".join([*parts, frame.func])


def scopes_at(node: ast.AST, line: int) -> list[_Scope]:
    """The classes and functions whose body holds `line`, outermost first.

    A `def` starts at its `def` line, after its decorators: those run in the enclosing scope.
    """
    for child in ast.iter_child_nodes(node):
        first, last = getattr(child, "lineno", None), getattr(child, "end_lineno", None)
        if first is None or last is None or not first <= line <= last:
            continue
        inner = scopes_at(child, line)
        return [child, *inner] if isinstance(child, _SCOPES) else inner
    return []


def library_path(path: str) -> str:
    """`torch/nn/parallel/distributed.py` for a file in site-packages; else as `short_path` shows it."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return short_path(path)


@dataclass(frozen=True)
class FatalDeath:
    """How a rank died of a fatal signal, as its terminal tells: what it printed, where it stood.

    gloo aborts a rank from one of its own C++ threads (`terminate called after throwing ...`):
    faulthandler then marks no thread `Current`, and `fatal_site` rightly says nothing. The main
    thread's stack still says where the user's code was — inside the collective that thread serves.
    """

    error: str
    """faulthandler's own line, `Fatal Python error: Aborted`, or empty."""
    thrown: str = ""
    """The C++ exception's type, `gloo::EnforceNotMet`, or empty."""
    what: str = ""
    """The C++ exception's `what()`, or empty."""
    where: Frame | None = None
    """The innermost user frame of the main thread."""
    call: str | None = None
    """The library call the main thread was in there (`all_reduce`)."""
    site: str = ""
    """`at train.py:13 (in all_reduce)`: the main thread's place, or empty."""

    @property
    def reason(self) -> str:
        """`gloo::EnforceNotMet: [enforce fail at ...] ...`; the fatal error's line without one."""
        if self.what:
            return f"{self.thrown}: {self.what}" if self.thrown else self.what
        return self.error


def read_death(data: bytes) -> FatalDeath | None:
    """The death told by the end of a rank's terminal (`DEATH_TAIL` bytes: what the C++ runtime
    printed, then the fatal dump the core appends); None without a fatal dump."""
    lines = terminal_lines(data)
    fatal = max((i for i, line in enumerate(lines) if line.startswith(_FATAL_ERROR)), default=None)
    if fatal is None:
        return None
    thrown = what = ""
    for line in lines:  # the last ones: a forked worker's may come first
        if found := _THROWN.search(line):
            thrown, what = found["type"], ""
        elif found := _WHAT.match(line):
            what = found["what"].strip()
    frames = main_thread_frames("\n".join(lines[fatal:]))
    user, call = blocked_at(frames)
    site = stack_site(frames) if frames else ""
    return FatalDeath(lines[fatal].strip(), thrown, what, user, call, site)


def main_thread_frames(dump: str) -> list[Frame]:
    """The main thread's frames (innermost first) in a fatal dump; empty when no thread is it.

    Threads started by `threading` end in its `_bootstrap`: never the main one.
    """
    threads = parse_threads(dump)
    started = [
        t for t in threads if t and not (t[-1].func == "_bootstrap" and t[-1].file.endswith("threading.py"))
    ]
    return main_thread(started) if started else []
