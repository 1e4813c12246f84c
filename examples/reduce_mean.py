"""Mean over the middle dim of a 3-D tensor: a strided (non-contiguous) reduction."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 2048
DIM2 = 1024  # 128 x 2048 x 1024 fp32 = 1 GiB
DIM = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [DIM]
