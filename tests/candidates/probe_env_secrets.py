"""Probe (honest kernel): fails to load when any credential reached its process.

It looks for the planted values the test sets in the verifier's environment (KS_PLANTED_*),
for secret-like variable names and for the parent's environment through /proc; it records what
it saw in SEEN and raises when anything secret is visible, so a verdict other than accepted
means a leak.
"""

import os
import re
from pathlib import Path

import torch
from _scale_relu_ext import ext
from torch import nn

PLANTED = "ks-planted-secret-"
SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD)($|_)", re.IGNORECASE)


def _parent_environment() -> str:
    try:
        return Path(f"/proc/{os.getppid()}/environ").read_bytes().decode(errors="replace")
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"


SEEN = {
    "planted": sorted(k for k, v in os.environ.items() if PLANTED in v),
    "secret_names": sorted(k for k in os.environ if SECRET_NAME.search(k)),
    "parent_has_planted": PLANTED in _parent_environment(),
}
if SEEN["planted"] or SEEN["secret_names"]:
    raise RuntimeError(f"secrets in the candidate's environment: {SEEN}")
if SEEN["parent_has_planted"]:
    raise RuntimeError(f"the verifier's environment is readable through /proc: {SEEN}")


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return ext.scale_relu(x.contiguous(), self.bias)
