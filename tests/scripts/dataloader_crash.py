"""Rank 1's DataLoader worker raises on one sample; torch re-raises it in the rank with the
worker's traceback as text, and rank 0 loses its peer in all_reduce."""

import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        if os.environ["RANK"] == "1" and index == 5:
            raise ValueError(f"bad sample {index}")
        return torch.tensor([float(index)])


def main() -> None:
    dist.init_process_group("gloo")
    for batch in DataLoader(Samples(), batch_size=2, num_workers=2):
        total = batch.sum()
        dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
