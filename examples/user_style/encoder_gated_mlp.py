"""Ordinary model code with two modules.

Only GatedMLP has example inputs (get_inputs_GatedMLP); Encoder has none on purpose, so the
editor shows the "add get_inputs_Encoder()" hint on it.
"""

import torch
from torch import nn
from torch.nn import functional as F


class GatedMLP(nn.Module):
    """LLaMA-style gated feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Encoder(nn.Module):
    """A small pre-norm encoder layer built from GatedMLP."""

    def __init__(self, dim: int = 1024, heads: int = 16, hidden: int = 4096):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = GatedMLP(dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


TOKENS = 16384
DIM = 2048
HIDDEN = 5632


def get_inputs_GatedMLP():
    return [torch.randn(TOKENS, DIM)]


def get_init_inputs_GatedMLP():
    return [DIM, HIDDEN]
