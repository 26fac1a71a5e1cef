"""`--log-dir`: each rank's raw terminal output, and a log of every state change.

The directory may be shared or planted (`/tmp/logs`), so nothing in it is trusted: the directory
must be ours, files are opened without following links, and only plain files of ours with a
single link are written, 0600 since a rank's output can hold secrets. Logging is a side show:
once a write fails (a full disk) it stops for good, with one message for the user, and never
takes the session down with it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable

from ddptui.core.model.state import RankState
from ddptui.core.transport.launch import LaunchError

# O_NONBLOCK: a FIFO planted under a log's name must fail to open (ENXIO), not hang the launch.
# No O_TRUNC: a file is emptied only after fstat shows it is a plain file of ours (see _open_file).
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


def log_names(nproc: int) -> list[str]:
    """The files a session writes: `rank-0.log` ... then `session.log`."""
    return [f"rank-{rank}.log" for rank in range(nproc)] + ["session.log"]


def check_log_dir(path: str, nproc: int = 0) -> None:
    """Raise LaunchError (one line) unless `path` can take the logs; creates it (0700) if missing.

    Meant for the CLI before the app draws, so a bad `--log-dir` is a usage message, not a
    failure after the ranks started. With `nproc`, also refuses early a log name that is already
    taken by a link, a FIFO or someone else's file. SessionLog checks all of it again, for real.
    """
    dir_fd = _open_dir(path)
    try:
        if not os.access(".", os.W_OK | os.X_OK, dir_fd=dir_fd):
            raise LaunchError(_cannot(path, "not writable"))
        for name in log_names(nproc):
            try:
                info = os.lstat(name, dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise LaunchError(_cannot(path, exc.strerror or str(exc))) from None
            _check_file(info, path, name)
    finally:
        os.close(dir_fd)


class SessionLog:
    """Writes `rank-N.log` (the bytes each rank's terminal printed) and `session.log` (states).

    `output` and `state` never raise: on the first failed write every file is closed, `failure`
    holds one line for the user (`--log-dir DIR: No space left on device; logging stopped`),
    `on_failure` (if given) is called once with it, and later calls do nothing.
    """

    def __init__(
        self, directory: str, nproc: int, *, on_failure: Callable[[str], None] | None = None
    ) -> None:
        self.directory = directory
        self.failure: str | None = None
        """Why logging stopped, one line for the user; None while it works."""
        self._on_failure = on_failure
        self._last: dict[int, str] = {}
        self._fds = _open_files(directory, log_names(nproc))
        self._events = self._fds[-1]
        self._open = True

    def output(self, rank: int, data: bytes) -> None:
        """Append what a rank printed."""
        if self._open:
            self._write(self._fds[rank], data)

    def state(self, rank: int, state: RankState) -> None:
        """Record a state change with the time, unless it reads the same as the rank's last one."""
        if not self._open:
            return
        text = f"rank {rank}: {state.describe()}"
        if self._last.get(rank) == text:
            return
        self._last[rank] = text
        self._write(self._events, f"{_stamp()} {text}\n".encode())

    def keep(self, name: str, data: bytes) -> None:
        """Write one more file into the directory, as safely as the logs; never raises."""
        if not self._open:
            return
        try:
            fd = _open_files(self.directory, [name])[0]
        except LaunchError as exc:
            self._said_once(str(exc))
            return
        self._write(fd, data)
        with contextlib.suppress(OSError):
            os.close(fd)

    def _said_once(self, why: str) -> None:
        """Report a file that could not be written (logging goes on)."""
        if self._on_failure is not None:
            self._on_failure(why)

    def close(self) -> None:
        """Close every file (the data is already written: nothing is buffered)."""
        if self._open:
            self._close_all()

    def _write(self, fd: int, data: bytes) -> None:
        """Write all of `data`, or stop logging on the first error."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            self._stop(exc)

    def _stop(self, exc: OSError) -> None:
        """Give up logging after a failed write, and tell the user once."""
        self._close_all()
        self.failure = f"--log-dir {self.directory}: {exc.strerror or exc}; logging stopped"
        if self._on_failure is not None:
            self._on_failure(self.failure)

    def _close_all(self) -> None:
        """Close every file, ignoring errors: a failing disk must not fail the session."""
        self._open = False
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _stamp() -> str:
    """The wall-clock time with milliseconds, `14:03:07.215`, from a single reading."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def _cannot(directory: str, why: str) -> str:
    """The one-line LaunchError message."""
    return f"cannot write logs to --log-dir {directory}: {why}"


def _open_dir(path: str) -> int:
    """The log directory, created 0700 if missing, opened; refused unless it is ours.

    Files are then opened relative to this fd, so the directory checked is the one written to,
    even if the path is swapped afterwards. A symlink to the directory is fine if we made it.
    """
    try:
        if not os.path.lexists(path):
            os.makedirs(path, 0o700, exist_ok=True)
        link = os.lstat(path)
        dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise LaunchError(_cannot(path, exc.strerror or str(exc))) from None
    # Both the link (if any) and the directory: whoever owns either can redirect the logs.
    owners = (link.st_uid, os.fstat(dir_fd).st_uid)
    stranger = next((uid for uid in owners if uid != os.geteuid()), None)
    if stranger is not None:
        os.close(dir_fd)
        raise LaunchError(_cannot(path, f"owned by another user (uid {stranger}); use a directory of yours"))
    return dir_fd


def _open_files(directory: str, names: list[str]) -> list[int]:
    """Every log file of `names` opened in `directory`, or LaunchError and none left open."""
    dir_fd = _open_dir(directory)
    fds: list[int] = []
    try:
        for name in names:
            fds.append(_open_file(dir_fd, directory, name))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    finally:
        os.close(dir_fd)
    return fds


def _open_file(dir_fd: int, directory: str, name: str) -> int:
    """One log file, created 0600 or reused if it is a plain file of ours, then emptied.

    A name taken by a symlink is refused rather than replaced: following it is how a planted link
    overwrites someone's file, and removing it might break a link the user made on purpose.
    """
    try:
        fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        raise LaunchError(_cannot(directory, _open_failure(name, exc))) from None
    try:
        _check_file(os.fstat(fd), directory, name)
        os.ftruncate(fd, 0)
        os.fchmod(fd, 0o600)  # a file left by an older run may be 0644
        os.set_blocking(fd, True)
    except OSError as exc:
        os.close(fd)
        raise LaunchError(_cannot(directory, f"{name}: {exc.strerror or exc}")) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_failure(name: str, exc: OSError) -> str:
    """Why opening log `name` failed, in the user's words."""
    if exc.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a symlink
        return f"{name} is a symbolic link (not followed; remove it)"
    if exc.errno == errno.ENXIO:  # a FIFO with nobody reading (O_NONBLOCK), or a socket
        return f"{name} is not a regular file"
    return f"{name}: {exc.strerror or exc}"


def _check_file(info: os.stat_result, directory: str, name: str) -> None:
    """Refuse a log name taken by anything but a plain, singly linked file of ours.

    A second hard link means the same file lives elsewhere too, perhaps someone's /etc/shadow.
    """
    why = None
    if stat.S_ISLNK(info.st_mode):
        why = "is a symbolic link (not followed; remove it)"
    elif not stat.S_ISREG(info.st_mode):
        why = "is not a regular file"
    elif info.st_nlink > 1:
        why = "has other hard links (not overwritten; remove it)"
    elif info.st_uid != os.geteuid():
        why = f"is owned by another user (uid {info.st_uid})"
    if why is not None:
        raise LaunchError(_cannot(directory, f"{name} {why}"))
