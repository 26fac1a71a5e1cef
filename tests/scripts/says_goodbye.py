"""Waits in a sleep; on SIGTERM prints a goodbye and takes a moment to exit, as a job that
flushes its logs or saves a checkpoint does."""

import signal
import sys
import time


def goodbye(signum: int, frame: object) -> None:
    print("cleaning up", flush=True)
    time.sleep(0.3)
    sys.exit(0)


signal.signal(signal.SIGTERM, goodbye)
time.sleep(600)
