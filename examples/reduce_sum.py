"""Sum over the last dim of a large matrix: one bandwidth-bound reduction, a baseline."""

import torch
import torch.nn as nn

ROWS = 16384
COLS = 16384  # 1 GiB fp32
DIM = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [DIM]
