"""Cheat: the reference's own PyTorch ops, run through the dispatcher's `redispatch`, which
records no aten op in the profiler (so the op-reuse check would not see them)."""

import torch
from torch import nn

_CUDA = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        scaled = torch.ops.aten.mul.Tensor.redispatch(_CUDA, x, 2.0)
        shifted = torch.ops.aten.add.Tensor.redispatch(_CUDA, scaled, self.bias)
        return torch.ops.aten.relu.default.redispatch(_CUDA, shifted)
