"""One rank holding huge values at a prompt: a 100-million-element tensor and a 10 MB string."""

import torch

big = torch.zeros(100_000_000)
big[7] = 3.0
text = "x" * 10_000_000
breakpoint()
