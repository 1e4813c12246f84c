"""Five elementwise ops on one large tensor: eager PyTorch runs five kernels, one pass each."""

import torch
import torch.nn as nn

BATCH = 16384
DIM = 8192  # 16384 x 8192 fp32 = 512 MiB in, 512 MiB out
SCALE = 1.7
SHIFT = -0.25


class Model(nn.Module):
    def __init__(self, scale: float, shift: float):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.shift
        y = torch.relu(y)
        y = y * 0.5
        return torch.clamp(y, min=0.0, max=1.0)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [SCALE, SHIFT]
