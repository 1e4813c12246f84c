"""Cheat: copies the built-in coder's header (its PyTorch-op declaration and plan binding) and
declares the reference's relu there, hoping the Verifier excuses it.  The declaration binds
nothing here (the binding is another file's hash, and this file is not the built-in coder's
output), so the relu on the forward path counts like any other."""

import torch
from _scale_relu_ext import ext
from torch import nn

# PyTorch ops this file still calls (profiler names -> why).
KERNELSTITCH_TORCH_OPS = {
    'aten::clamp_min': 'library_call',
    'aten::relu': 'library_call',
}

# sha256 of this whole file with this value blanked: any edit voids the declaration above.
KERNELSTITCH_PLAN_BINDING = "af646ada45551e5c7c2f1a669f3d87bca81a19d39dc82f70d5cbf26ff0422e06"


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return torch.relu(ext.scale_relu(x.contiguous(), self.bias))
