"""Plain Python (no torch): a loop that stops at a breakpoint() every step, and never ends."""

import itertools
import time

for step in itertools.count():  # noqa: B007  (read at the prompt: p step, :until)
    breakpoint()  # @step
    time.sleep(0.05)
