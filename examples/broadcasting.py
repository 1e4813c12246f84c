"""Per-channel scale and bias (two broadcast layouts), sigmoid, then a per-column row vector."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 256
HEIGHT = 128
WIDTH = 128  # 32 x 256 x 128 x 128 fp32 = 512 MiB


class Model(nn.Module):
    def __init__(self, channels: int, width: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))  # broadcasts from the right
        self.bias = nn.Parameter(torch.randn(1, channels, 1, 1))  # explicit 4-D layout
        self.row = nn.Parameter(torch.randn(width))  # broadcasts over the last dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x * self.scale + self.bias)
        return y * self.row


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, WIDTH]
