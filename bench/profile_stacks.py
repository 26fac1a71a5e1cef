"""py-spy on a running process, for the benches: record its stacks meanwhile, then its busiest functions.

For a process the bench did not start in its own interpreter (a detached session, a `ddptui join`),
where cProfile cannot be put. py-spy samples it from outside (pausing it briefly at each sample:
use it to see where time goes, not for figures). Only the thread holding the GIL is sampled
(`--gil`: threads waiting in a select or on a lock are left out), so the shares are of the time
the process ran Python code, and the seconds say how long it did.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

RATE = 200
"""Samples a second."""
TOP = 15
"""Functions printed, by own samples and by samples they were on the stack for."""


class PySpy:
    """`py-spy record` of one process, from construction until `stop`."""

    def __init__(self, pid: int, directory: Path, name: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.name, self.pid = name, pid
        self.out = directory / f"{name}-{pid}.txt"
        argv = [
            self.executable(),
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(RATE),
            "--format",
            "raw",
            "--gil",
        ]
        self._spy = subprocess.Popen(
            [*argv, "--output", str(self.out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    @staticmethod
    def executable() -> str:
        """py-spy beside this Python (the dev extras install it), else on PATH."""
        beside = Path(sys.executable).parent / "py-spy"
        return str(beside) if beside.exists() else shutil.which("py-spy") or "py-spy"

    @staticmethod
    def missing() -> str:
        """Why py-spy cannot run here ("" when it can)."""
        found = Path(PySpy.executable())
        return (
            ""
            if found.exists() or shutil.which(str(found))
            else "py-spy is not installed (pip install py-spy)"
        )

    def stop(self) -> str:
        """End the recording; its busiest functions, as text."""
        self._spy.send_signal(signal.SIGINT)  # py-spy writes its file as it stops
        try:
            _, err = self._spy.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self._spy.kill()
            _, err = self._spy.communicate()
        if not self.out.exists():
            return f"\npy-spy {self.name} ({self.pid}): no profile ({err.strip()[-200:]})"
        return busiest(self.out, f"{self.name} ({self.pid})")


def busiest(raw: Path, title: str) -> str:
    """The functions with most samples in a py-spy raw file: on top of the stack, and anywhere on it."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    files: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        samples += int(count)
        own[frames[-1]] += int(count)
        files[source_file(frames[-1])] += int(count)
        for frame in set(frames):
            total[frame] += int(count)
    if not samples:
        return f"\npy-spy {title}: no samples"
    out = [f"\npy-spy {title}: {samples} samples at {RATE}/s while running ({samples / RATE:.1f} s)"]
    for heading, counts in (("own", own), ("file, own", files), ("on the stack", total)):
        out.append(f"  by {heading}:")
        out += [f"    {100 * n / samples:5.1f} %  {frame}" for frame, n in counts.most_common(TOP)]
    return "\n".join(out)


def source_file(frame: str) -> str:
    """The file of a py-spy frame (`function (package/file.py:line)`)."""
    return frame.rpartition(" (")[2].rstrip(")").rpartition(":")[0]
