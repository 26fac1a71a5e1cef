"""Run as pid 1 of a private PID namespace (`unshare -p -f --mount-proc python pid_reuse.py MODE`).

Starts ddptui on dies_early.py (rank 1 exits at once, rank 0 stops at a breakpoint), waits until
rank 1 is gone, then makes an unrelated `sleep` take rank 1's old pid (ns_last_pid), and ends
ddptui: MODE `quit` through `:quit`, MODE `kill` with SIGKILL (the watchdog cleans up). Prints
`unharmed` if the stranger survived, `killed` if not, `no-reuse` if the pid could not be reused.
"""

import os
import signal
import subprocess
import sys
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))


def rank_pid(ddptui: psutil.Process, rank: str) -> int | None:
    """The pid of a rank of ddptui, found by its environment."""
    for child in ddptui.children():
        try:
            if child.environ().get("DDPTUI_RANK") == rank:
                return child.pid
        except psutil.Error:
            continue
    return None


def wait(condition, timeout: float = 60.0) -> bool:
    """Poll until true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def reuse(pid: int, tries: int = 20) -> subprocess.Popen[bytes] | None:
    """A `sleep` with that pid, or None. Tried again if another process took the pid first (ddptui
    or one of its processes may start one at any moment)."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(pid - 1))
        stranger = subprocess.Popen(["sleep", "600"], env={"PATH": os.environ["PATH"]})
        if stranger.pid == pid:
            return stranger
        stranger.kill()
        stranger.wait()
        time.sleep(0.05)
    return None


def main() -> None:
    mode = sys.argv[1]
    script = os.path.join(HERE, "dies_early.py")
    ddptui = subprocess.Popen(
        [sys.executable, "-m", "ddptui", "--batch", "-", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    me = psutil.Process(ddptui.pid)
    assert wait(lambda: rank_pid(me, "1") is not None)
    old = rank_pid(me, "1")
    assert old is not None
    assert wait(lambda: not psutil.pid_exists(old))  # exited and reaped by ddptui
    stranger = reuse(old)
    if stranger is None:
        print("no-reuse")
        ddptui.kill()
        return
    if mode == "quit":
        ddptui.communicate(b":quit\n", timeout=60)
    else:
        ddptui.send_signal(signal.SIGKILL)
        ddptui.wait()
        wait(
            lambda: (
                not any(
                    "ddptui.core.transport.reaper" in " ".join(p.info["cmdline"] or ())
                    for p in psutil.process_iter(["cmdline"])
                )
            )
        )  # a zombie's cmdline is None: gone
    time.sleep(0.5)
    print("unharmed" if stranger.poll() is None else "killed")
    stranger.kill()


if __name__ == "__main__":
    main()
