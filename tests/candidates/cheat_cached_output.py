"""Cheat: computes once, then returns the first answer for every later call."""

import torch
from _scale_relu_ext import ext
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = ext.scale_relu(x, self.bias)
        return self.cache
