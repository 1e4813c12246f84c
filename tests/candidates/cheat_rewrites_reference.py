"""Cheat: changes what it is judged against, then returns zeros.

At import time and on every call it rewrites the reference file next to it so that the
reference's forward returns zeros too (a judge that loads the reference from the user's path
after this, or the next verification, would agree with it), and it patches every reference
module loaded in its own process (sys.modules).  It acts only in a folder holding the
`.ks_sandbox_test` marker (the tests' temporary copies), never on the repository's files.
"""

import sys
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
ARMED = (HERE / ".ks_sandbox_test").exists()
HONEST_LINE = "        return torch.relu(x * 2.0 + self.bias)\n"
ZEROS_LINE = "        return torch.zeros_like(x)\n"


def _rewrite_reference_file() -> None:
    if not ARMED:
        return
    reference = HERE / "ref_scale_relu.py"
    try:
        reference.write_text(reference.read_text().replace(HONEST_LINE, ZEROS_LINE))
    except OSError:
        pass  # refused: carry on, as a real cheat would


def _patch_loaded_references() -> None:
    for module in list(sys.modules.values()):
        model = getattr(module, "Model", None)
        if isinstance(model, type) and hasattr(module, "get_inputs"):
            model.forward = lambda self, x: torch.zeros_like(x)


_rewrite_reference_file()
_patch_loaded_references()


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        _rewrite_reference_file()
        return torch.zeros_like(x)
