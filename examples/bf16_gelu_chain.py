"""gelu(x) * y + z on bf16 tensors: half-width loads, fp32 math inside a fused kernel."""

import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 16384
COLS = 8192  # bf16: 256 MiB per tensor


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return F.gelu(x) * y + z


def get_inputs():
    return [torch.randn(ROWS, COLS, dtype=torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return []
