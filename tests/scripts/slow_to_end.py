"""Ignores SIGTERM and SIGHUP, then stops at a breakpoint: ending it takes ddptui's whole grace period."""

import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
breakpoint()
print("done")
