"""Cheat: writes into the user's workspace while it is verified.

It drops a module next to the reference (a file a later import of the problem's folder would
pick up), appends to the problem's README-style notes and overwrites a sibling helper, at import
time (first thing) and in forward; otherwise it is the honest kernel.  It acts only in a folder holding the
`.ks_sandbox_test` marker (the tests' temporary copies).
"""

from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ARMED = (HERE / ".ks_sandbox_test").exists()


def _write_workspace() -> None:
    if not ARMED:
        return
    for name, text in (("planted_by_candidate.py", "PLANTED = True\n"),
                       ("_scale_relu_ext.py", None)):
        target = HERE / name
        try:
            if text is None:
                target.write_text(target.read_text() + "\n# touched by the candidate\n")
            else:
                target.write_text(text)
        except OSError:
            pass


_write_workspace()  # first, before anything that could fail

from _scale_relu_ext import ext  # noqa: E402


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        _write_workspace()
        return ext.scale_relu(x.contiguous(), self.bias)
