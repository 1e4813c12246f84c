"""Reference problem for the stress-case tests: softmax of x over the last dim where `keep`."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x, keep):
        return torch.softmax(x.masked_fill(~keep, float("-inf")), dim=-1)


def get_inputs():
    # a quarter masked at random: a row of 96 is never masked whole by chance
    return [torch.randn(16, 64, 96), torch.rand(16, 64, 96) > 0.25]


def get_init_inputs():
    return []
