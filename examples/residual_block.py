"""Pre-norm transformer feed-forward block: x + Linear(ReLU(Linear(LayerNorm(x))))."""

import torch
import torch.nn as nn

TOKENS = 16384
HIDDEN = 2048
FFN = 8192


class Model(nn.Module):
    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, FFN]
