"""A DataLoader worker dies of a signal: SIGBUS (what a full /dev/shm gives) or SIGKILL (the OOM
killer), as the first argument says."""

import os
import signal
import sys

import torch
from torch.utils.data import DataLoader, Dataset

SIGNAL = getattr(signal, sys.argv[1])


class Samples(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == 3:
            os.kill(os.getpid(), SIGNAL)
        return torch.tensor([float(index)])


for _batch in DataLoader(Samples(), batch_size=2, num_workers=1):
    pass
