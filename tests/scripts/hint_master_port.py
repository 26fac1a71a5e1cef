"""Hard-codes MASTER_PORT, as tutorials do, over the free port the launcher chose; it is taken.

The port is 29500 unless given as the first argument (so a test can pick one it holds).
"""

import os
import sys

import torch.distributed as dist

os.environ["MASTER_PORT"] = sys.argv[1] if len(sys.argv) > 1 else "29500"
dist.init_process_group("gloo")
