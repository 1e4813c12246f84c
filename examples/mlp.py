"""Linear -> GELU -> Linear: two GEMMs; the GELU rides in the first GEMM's epilogue."""

import torch
import torch.nn as nn

BATCH = 8192
IN_FEATURES = 4096
HIDDEN = 16384
OUT_FEATURES = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
