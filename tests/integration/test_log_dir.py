"""`--log-dir` on a hostile or failing disk: no link followed, private modes, a full disk survived."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddptui.core.model.state import RankState
from ddptui.core.transport.launch import LaunchError
from ddptui.core.transport.logs import SessionLog, check_log_dir


def mode(path: Path) -> int:
    """The permission bits of `path`."""
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run with a given umask, then put the old one back."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file that is not ours to touch, outside the log directory."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    return victim


def assert_refused(directory: Path, nproc: int, match: str) -> None:
    """Both the early check and SessionLog itself refuse `directory`."""
    with pytest.raises(LaunchError, match=match):
        check_log_dir(str(directory), nproc)
    with pytest.raises(LaunchError, match=match):
        SessionLog(str(directory), nproc)


# -- what is written, and how ------------------------------------------------------------------


def test_new_directory_is_0700_and_files_0600_whatever_the_umask(tmp_path: Path) -> None:
    directory = tmp_path / "a" / "logs"
    with umask(0):
        log = SessionLog(str(directory), 2)
        log.output(1, b"hello\r\n")
        log.close()
    assert mode(directory) == 0o700
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["rank-0.log", "rank-1.log", "session.log"]
    assert all(mode(directory / name) == 0o600 for name in names)
    assert (directory / "rank-1.log").read_bytes() == b"hello\r\n"


def test_check_log_dir_creates_the_directory_private(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    with umask(0):
        check_log_dir(str(directory), 4)
    assert directory.is_dir() and mode(directory) == 0o700


def test_files_of_an_earlier_run_are_emptied_and_made_private(tmp_path: Path) -> None:
    (tmp_path / "rank-0.log").write_bytes(b"old run\n")
    (tmp_path / "rank-0.log").chmod(0o644)
    SessionLog(str(tmp_path), 1).close()
    assert (tmp_path / "rank-0.log").read_bytes() == b""
    assert mode(tmp_path / "rank-0.log") == 0o600


def test_identical_state_lines_are_written_once_per_rank(tmp_path: Path) -> None:
    log = SessionLog(str(tmp_path), 2)
    log.state(0, RankState())
    log.state(0, RankState())
    log.state(1, RankState())
    log.state(0, RankState())
    log.close()
    lines = (tmp_path / "session.log").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        f"rank 0: {RankState().describe()}",
        f"rank 1: {RankState().describe()}",
    ]


def test_a_symlinked_directory_of_ours_is_fine(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    check_log_dir(str(tmp_path / "link"), 1)
    SessionLog(str(tmp_path / "link"), 1).close()
    assert (tmp_path / "real" / "rank-0.log").exists()


# -- what is refused ---------------------------------------------------------------------------


def test_a_symlink_planted_at_a_rank_log_is_not_followed(tmp_path: Path, outside: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    (directory / "rank-0.log").symlink_to(outside)
    assert_refused(directory, 2, "rank-0.log is a symbolic link")
    assert outside.read_text() == "precious\n"
    assert not (directory / "rank-1.log").exists() or (directory / "rank-1.log").stat().st_size == 0


def test_a_dangling_symlink_is_not_followed_to_create_a_file(tmp_path: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    target = tmp_path / "created-through-link"
    (directory / "session.log").symlink_to(target)
    assert_refused(directory, 1, "session.log is a symbolic link")
    assert not target.exists()


def test_a_hard_link_to_another_file_is_not_emptied(tmp_path: Path, outside: Path) -> None:
    directory = tmp_path / "logs"
    directory.mkdir()
    os.link(outside, directory / "rank-1.log")
    assert_refused(directory, 2, "rank-1.log has other hard links")
    assert outside.read_text() == "precious\n"


def test_a_fifo_under_a_log_name_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "rank-0.log")
    done = threading.Event()

    def attempt() -> None:
        """Try to open the logs; must return, not wait for a FIFO reader."""
        with contextlib.suppress(LaunchError):
            SessionLog(str(tmp_path), 1)
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(5)
    assert_refused(tmp_path, 1, "rank-0.log is not a regular file")


def test_a_file_is_not_a_log_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert_refused(tmp_path / "file", 1, "Not a directory")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory away")
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "theirs"
    directory.mkdir()
    os.chown(directory, 65534, 65534)
    assert_refused(directory, 1, r"owned by another user \(uid 65534\)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a symlink away")
def test_a_symlink_to_the_directory_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    os.chown(tmp_path / "link", 65534, 65534, follow_symlinks=False)
    assert_refused(tmp_path / "link", 1, "owned by another user")


# -- a full disk -------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def test_a_full_disk_stops_logging_once_without_raising(small_disk: Path) -> None:
    told: list[str] = []
    log = SessionLog(str(small_disk / "logs"), 3, on_failure=told.append)
    chunk = b"x" * 1000 + b"\n"
    for i in range(200):  # 200 KB into 64 KiB
        log.output(i % 2, chunk)
        log.state(i % 2, RankState())
    assert log.failure is not None
    assert log.failure.endswith("No space left on device; logging stopped")
    assert log.failure.startswith(f"--log-dir {small_disk / 'logs'}: ")
    assert told == [log.failure]
    sizes = [p.stat().st_size for p in sorted((small_disk / "logs").iterdir())]
    log.output(0, chunk)
    log.state(2, RankState())  # a line never written for rank 2, so only the failure skips it
    log.close()
    log.close()
    assert [p.stat().st_size for p in sorted((small_disk / "logs").iterdir())] == sizes
    assert told == [log.failure]


def test_writes_after_close_are_ignored(tmp_path: Path) -> None:
    log = SessionLog(str(tmp_path), 1)
    log.close()
    log.output(0, b"late")
    log.state(0, RankState())
    assert log.failure is None
    assert (tmp_path / "rank-0.log").read_bytes() == b""
