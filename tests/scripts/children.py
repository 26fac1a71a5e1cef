"""Starts child processes (a multiprocessing worker and a subprocess) on every rank, then stops."""

import multiprocessing
import os
import subprocess
import time


def worker() -> None:
    time.sleep(600)


if __name__ == "__main__":
    child = multiprocessing.get_context("fork").Process(target=worker)
    child.start()
    grandchild = subprocess.Popen(["sleep", "600"])
    if os.environ.get("CHILDREN_BLOCK") == "1":
        time.sleep(600)
    breakpoint()
    print("done")
