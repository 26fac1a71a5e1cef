"""Every rank starts a daemon the classic way (setsid + double fork), then stops at a breakpoint."""

import subprocess
import sys

DAEMON = """
import os, time
os.setsid()
if os.fork():
    os._exit(0)
time.sleep(600)
"""
subprocess.run([sys.executable, "-c", DAEMON], check=True)  # returns once the middle process exits
breakpoint()
