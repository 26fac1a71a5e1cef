"""A torchrun job whose first attempt fails: rank 1 raises, rank 0 ends early; torchrun restarts both
(`--max-restarts 1`), and in the second attempt every rank stops at breakpoint() (used by test_restarts).

The first attempt ends before `init_process_group`: torchrun's static rendezvous keeps its store
across restarts, and gloo in a second attempt may read a peer's address from the first (a hang, or
`Connection refused`) when that peer starts a little later than the others.
"""

import os
import sys

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) + 1
rank = int(os.environ["RANK"])
if attempt == 1 and rank == 1:
    raise RuntimeError("the first attempt fails in rank 1")
if attempt == 1:
    sys.exit(0)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
breakpoint()
value = torch.tensor([float(rank + 10 * attempt)])
dist.all_reduce(value)
print(f"rank {rank} attempt {attempt} sum {value.item()}")
dist.destroy_process_group()
