"""Cheat: the reference's own PyTorch ops, run through the dispatcher's `redispatch`, which
records no aten op in the profiler (so the op-reuse check would not see them)."""

import torch
from torch import nn


def _backend(x: torch.Tensor):
    key = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return torch._C.DispatchKeySet(key)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        key = _backend(x)
        scaled = torch.ops.aten.mul.Scalar.redispatch(key, x, 2.0)
        shifted = torch.ops.aten.add.Tensor.redispatch(key, scaled, self.bias)
        return torch.ops.aten.relu.default.redispatch(key, shifted)
