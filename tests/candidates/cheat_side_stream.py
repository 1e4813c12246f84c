"""Cheat: runs the kernel on a side stream and returns without joining it, so CUDA events on
the caller's stream time nothing."""

import torch
from _scale_relu_ext import ext
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        with torch.cuda.stream(self.side):
            out = ext.scale_relu(x, self.bias)
        return out
