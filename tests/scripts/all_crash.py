"""Every rank stops at a breakpoint, then hits the same bug (plain Python, no torch)."""

import os

rank = int(os.environ["RANK"])
breakpoint()
value = rank * undefined_name  # noqa: F821 (the bug)
