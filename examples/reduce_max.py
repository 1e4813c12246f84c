"""Max over the last dim (torch.amax): a row reduction with a non-additive combine."""

import torch
import torch.nn as nn

ROWS = 32768
COLS = 8192  # 1 GiB fp32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
