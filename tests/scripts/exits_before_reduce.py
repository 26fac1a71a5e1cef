"""Rank 1 exits 0 before an all_reduce that rank 0 waits in (an early exit).

A child of rank 1 keeps its gloo sockets open, so rank 0 is not told its peer left: it waits on.
"""

import os
import signal
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 1:
    for ignored in (signal.SIGTERM, signal.SIGHUP):  # the child outlives rank 1's pty and rank 0
        signal.signal(ignored, signal.SIG_IGN)  # set before the fork: rank 1 may exit first
    if os.fork() == 0:
        time.sleep(60)
    os._exit(0)  # no destructors: gloo's sockets stay open in the child
dist.all_reduce(torch.ones(3))
