"""Pairs [0,1] and [2,3]; rank 3 skips its pair's second all_reduce."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])]
mine = pairs[rank // 2]
dist.all_reduce(torch.ones(2), group=mine)
if rank != 3:
    dist.all_reduce(torch.ones(2), group=mine)
dist.barrier()
dist.destroy_process_group()
