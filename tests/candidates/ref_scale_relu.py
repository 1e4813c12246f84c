"""Reference problem for the Verifier tests: y = relu(x * 2 + b), x [4096, 4096] fp32."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * 2.0 + self.bias)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return [4096]
