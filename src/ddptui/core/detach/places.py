"""Where detached sessions live: one private directory per user, a socket and a file per session.

The directory is `$XDG_RUNTIME_DIR/ddptui`, or `/tmp/ddptui-UID` without one; it must be the
user's own, mode 0700, and no symlink (another user could otherwise plant sockets or read
tokens). Each session has `ID.sock` (its socket, 0600), `ID.json` (0600: its process, script,
ranks, start time and token) and `ID.log` (what the session process says to its stderr).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

ID_PATTERN = re.compile(r"[0-9a-f]{6}")


class PlaceError(Exception):
    """A session or its directory that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Entry:
    """One session as its file describes it."""

    id: str
    pid: int
    pid_started: float
    """The session process's start time: a later process with the same pid is not it."""
    script: str
    ranks: int
    started: float
    token: str

    @property
    def socket(self) -> Path:
        """The session's socket."""
        return home() / f"{self.id}.sock"

    def alive(self) -> bool:
        """True while the session process runs (a zombie left unreaped by init does not)."""
        try:
            process = psutil.Process(self.pid)
            started: float = process.create_time()
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
        except psutil.Error:
            return False
        return abs(started - self.pid_started) < 0.01


def home() -> Path:
    """The per-user directory of sessions (not checked: `checked_home` checks it)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "ddptui"
    return Path(f"/tmp/ddptui-{os.getuid()}")


def checked_home(create: bool = False) -> Path:
    """`home()`, made when `create` and missing; PlaceError unless it is the user's own private
    directory."""
    path = home()
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise PlaceError(f"no sessions: {path} does not exist") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise PlaceError(f"{path} is not a directory (a symlink or a file): not using it for sessions")
    if info.st_uid != os.getuid():
        raise PlaceError(f"{path} belongs to another user: not using it for sessions")
    if info.st_mode & 0o077:
        raise PlaceError(f"{path} is open to other users (mode {info.st_mode & 0o777:o}, not 700)")
    return path


def new_id(directory: Path) -> str:
    """A short id no session in `directory` uses."""
    while True:
        found = secrets.token_hex(3)
        if not (directory / f"{found}.json").exists() and not (directory / f"{found}.sock").exists():
            return found


def write(entry: Entry) -> None:
    """Write the session's file, 0600, whole or not at all."""
    directory = checked_home()
    temporary = directory / f".{entry.id}.json"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(entry), out)
    os.replace(temporary, directory / f"{entry.id}.json")


def read(path: Path) -> Entry | None:
    """The session a file describes; None for a file that is not one."""
    try:
        with open(path, "rb") as source:
            body = json.load(source)
        return Entry(**body)
    except (OSError, ValueError, TypeError):
        return None


def remove(session: str) -> None:
    """Remove a session's files (those that are there)."""
    directory = home()
    for suffix in (".sock", ".json", ".log"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / f"{session}{suffix}")


def live() -> list[Entry]:
    """The sessions whose process runs, oldest first; a stale session's files are removed."""
    try:
        directory = checked_home()
    except PlaceError as exc:
        if not home().exists():
            return []
        raise exc from None
    found = []
    for path in sorted(directory.glob("*.json")):
        entry = read(path)
        if entry is not None and entry.id == path.stem and entry.alive():
            found.append(entry)
        elif ID_PATTERN.fullmatch(path.stem):
            remove(path.stem)
    return sorted(found, key=lambda entry: entry.started)


def find(session: str | None) -> Entry:
    """The live session `session` names, or the only one when None; PlaceError says why not."""
    if session is not None and not ID_PATTERN.fullmatch(session):
        raise PlaceError(f"{session!r} is not a session id (six hex digits; ddptui sessions lists them)")
    if session is not None and (home() / f"{session}.json").exists():
        entry = read(home() / f"{session}.json")
        if entry is None or not entry.alive():
            checked_home()
            remove(session)
            raise PlaceError(f"session {session} has ended (its process is gone)")
    sessions = live()
    if session is not None:
        for entry in sessions:
            if entry.id == session:
                return entry
        raise PlaceError(f"no session {session} (ddptui sessions lists them)")
    if len(sessions) == 1:
        return sessions[0]
    if not sessions:
        raise PlaceError("no session runs (start one with ddptui --detach SCRIPT)")
    ids = ", ".join(entry.id for entry in sessions)
    raise PlaceError(f"{len(sessions)} sessions run, name one: {ids}")
