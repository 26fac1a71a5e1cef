"""A GPU script on a CPU-only torch: the process group asks for NCCL."""

import torch.distributed as dist

dist.init_process_group("nccl")
