"""Reference problem too large to verify on the GPU it runs on: an input and an output of a
quarter of the device's memory each (24 GiB each on an 80 GB H100, 35 GiB on an H200).  The
reference runs, but the candidate and the judge cannot both hold a check's tensors, on any
card: sized from the device, not for one card (an H200's 139 GiB fitted a fixed 24 GiB on paper)."""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    total = torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else 24 << 32
    rows = 1024
    return [torch.randn(rows, total // 16 // rows)]  # fp32: total / 4 bytes
