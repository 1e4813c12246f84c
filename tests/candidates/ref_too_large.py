"""Reference problem too large to verify on an 80 GB GPU: a 24 GiB input and a 24 GiB output
(the reference runs, but the candidate and the judge cannot both hold a check's tensors)."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(6 * 1024, 1024 * 1024)]
