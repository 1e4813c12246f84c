"""SwiGLU gate silu(a) * b on Llama-3-8B-sized activations: two kernels in eager, one fused."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 8192
INTERMEDIATE = 14336  # 8192 x 14336 fp32 = 448 MiB per tensor


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(TOKENS, INTERMEDIATE), torch.randn(TOKENS, INTERMEDIATE)]


def get_init_inputs():
    return []
