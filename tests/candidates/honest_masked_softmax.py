"""Stress-case test candidate (_masked_softmax.cu, mode 0): see the kernel's comment."""

from _masked_softmax_ext import ext
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x, keep):
        return ext.masked_softmax(x, keep, 0)
