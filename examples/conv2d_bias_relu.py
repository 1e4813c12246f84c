"""Conv2d (with bias) followed by ReLU and a scalar multiply-add: a conv with a cheap epilogue."""

import torch
import torch.nn as nn

BATCH = 128
IN_CHANNELS = 64
OUT_CHANNELS = 128
HEIGHT = 64
WIDTH = 64
KERNEL_SIZE = 3
MULTIPLIER = 2.0
OFFSET = 0.5


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier, offset):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.multiplier = multiplier
        self.offset = offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        return y * self.multiplier + self.offset


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL_SIZE, MULTIPLIER, OFFSET]
