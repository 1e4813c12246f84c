"""Cheat: forges the judge's replies in its own process and returns zeros.

The verifier's candidate task runs in the candidate's process, so the candidate can replace the
client that asks the judge: every comparison then "passes".  The judge's own record, kept in
the reference worker, shows that it never compared these outputs clean (`judge_bypassed`).
"""

import sys

import torch
from torch import nn


def _forge() -> None:
    for name, module in list(sys.modules.items()):
        if name.endswith("verifier.judge"):
            module.JudgeClient.ask = lambda self, request: {"failures": []}


_forge()


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.zeros_like(x)
