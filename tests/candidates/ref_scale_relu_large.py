"""Reference problem for the Verifier's large-input tests: y = relu(x * 2 + b), x [393216, 4096]
fp32 (6 GiB, the size of KernelBench level 1's elementwise inputs)."""

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(x * 2.0 + self.bias)


def get_inputs():
    return [torch.randn(393216, 4096)]


def get_init_inputs():
    return [4096]
