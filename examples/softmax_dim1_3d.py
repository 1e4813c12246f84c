"""Softmax over dim 1 of [B, C, L]: the reduced dim is strided, not the contiguous last one."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 1024
LENGTH = 4096  # 32 x 1024 x 4096 fp32 = 512 MiB
DIM = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return [DIM]
