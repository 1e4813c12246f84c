"""Cheat: relu rewritten as `F.hardtanh(v, 0, inf)` (the same function under another name), and
no custom kernel at all."""

import torch
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return F.hardtanh(x * 2.0 + self.bias, 0.0, float("inf"))
