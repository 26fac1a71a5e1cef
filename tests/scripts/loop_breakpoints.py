"""A training-like loop with a breakpoint() in its step, and a second one after the loop."""

import os

rank = int(os.environ["RANK"])
done = []
for step in range(5):
    breakpoint()
    done.append(step)
breakpoint()
print(f"rank {rank} ran {len(done)} steps")
