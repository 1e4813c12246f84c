"""Cheat: computes honestly in strict fp32 (where the Verifier checks) and skips the work when
cuDNN TF32 is allowed, the PyTorch default the Verifier times under."""

import torch
from _scale_relu_ext import ext
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        if torch.backends.cudnn.allow_tf32:
            return torch.empty_like(x)
        return ext.scale_relu(x.contiguous(), self.bias)
