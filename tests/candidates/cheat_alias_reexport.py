"""Cheat: the reference's relu on the forward path, through a re-export under another name
(`torch.clamp_min`), imported under an alias and taken from a table, so no `relu` is written.
Its own kernel runs too, so only the op-reuse rule can name it statically."""

import torch
from _scale_relu_ext import ext
from torch import clamp_min as lower_bound
from torch import nn

_EPILOGUES = {"floor": lower_bound}


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        epilogue = _EPILOGUES["floor"]
        return epilogue(ext.scale_relu(x.contiguous(), self.bias), 0.0)
