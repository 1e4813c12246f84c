"""Cheat: the reference's work through the ATen op registry (`torch.ops.aten.*`), with relu
spelled as a clamp at zero, and no kernel of its own."""

import torch
from torch import nn

aten = torch.ops.aten


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        scaled = aten.add.Tensor(aten.mul.Scalar(x, 2.0), self.bias)
        return torch.ops.aten.clamp.default(scaled, 0.0)
