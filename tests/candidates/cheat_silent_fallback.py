"""Cheat: its kernel always fails, and forward quietly falls back to PyTorch."""

import torch
from _scale_relu_ext import ext
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        try:
            return ext.scale_relu_broken(x, self.bias)
        except RuntimeError:
            return torch.relu(x * 2.0 + self.bias)
