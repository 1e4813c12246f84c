"""Cheat: launches nothing and hopes the reference's answer is still in the allocator."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.empty_like(x)
