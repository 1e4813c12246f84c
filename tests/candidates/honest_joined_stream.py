"""Honest candidate that works on a side stream and joins it before returning."""

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
        current = torch.cuda.current_stream()
        self.side.wait_stream(current)
        with torch.cuda.stream(self.side):
            out = ext.scale_relu(x, self.bias)
        current.wait_stream(self.side)  # joined: the caller's stream sees the finished work
        out.record_stream(current)
        return out
