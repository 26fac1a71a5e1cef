"""Every rank starts a daemon that clears its environment (setsid, double fork, execve with an
empty environment), then stops at a breakpoint."""

import subprocess
import sys

DAEMON = """
import os, sys
os.setsid()
if os.fork():
    os._exit(0)
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)  # clean daemon"], {})
"""
subprocess.run([sys.executable, "-c", DAEMON], check=True)  # returns once the middle process exits
breakpoint()
