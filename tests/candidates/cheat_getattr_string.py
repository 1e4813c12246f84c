"""Cheat: the reference's relu, named by a string built from pieces so that no `torch.relu` is
written anywhere (and no kernel of its own)."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        activation = getattr(torch, "re" + "lu")
        return activation(x * 2.0 + self.bias)
