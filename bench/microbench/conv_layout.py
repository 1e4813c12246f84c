"""Where conv2d_bias_relu's time goes, and what channels_last buys, under the Verifier's strict
fp32 (no TF32).  Times the pieces of examples/conv2d_bias_relu.py on one GPU with CUDA events (L2
flushed before each run, median of 20): the NCHW conv eager runs, the same conv on a channels_last
input (with and without the input conversion), the elementwise epilogue reading the channels_last
conv output and writing NCHW (what a drop-in candidate must return: the reference's output is
contiguous), and torch.compile's whole forward.  Prints one JSON line per measurement.

Usage (GPU machine): python bench/microbench/conv_layout.py
"""

from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F

from kernelstitch.core.cuda_timing import CudaTimer


def timed(fn, flush, runs: int = 20) -> float:
    samples = CudaTimer().samples_ms(fn, runs=runs, warmup=3, flush=lambda: flush.fill_(1))
    return statistics.median(samples)


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.uint8, device=dev)
    x = torch.randn(128, 64, 64, 64, device=dev)
    conv = torch.nn.Conv2d(64, 128, 3, padding=1).to(dev)
    w, b = conv.weight.detach(), conv.bias.detach()
    w_cl = w.contiguous(memory_format=torch.channels_last)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    y_cl = F.conv2d(x_cl, w_cl, None, 1, 1)

    def eager():
        return torch.relu(F.conv2d(x, w, b, 1, 1)) * 2.0 + 0.5

    def ref_out():
        return eager()

    rows = {
        "eager_forward_nchw": eager,
        "conv_nchw_nobias": lambda: F.conv2d(x, w, None, 1, 1),
        "to_channels_last_input": lambda: x.contiguous(memory_format=torch.channels_last),
        "conv_channels_last_nobias": lambda: F.conv2d(x_cl, w_cl, None, 1, 1),
        "conv_channels_last_with_conversion": lambda: F.conv2d(x.contiguous(memory_format=torch.channels_last),
                                                               w_cl, None, 1, 1),
        "epilogue_cl_to_nchw_torch": lambda: (torch.relu(y_cl + b.view(-1, 1, 1)) * 2.0 + 0.5).contiguous(),
        "copy_cl_to_nchw": lambda: y_cl.contiguous(),
    }
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        for name, fn in rows.items():
            if name.startswith("conv") or name.startswith("eager"):
                print(json.dumps({"what": name, "cudnn_benchmark": bench, "ms": round(timed(fn, flush), 4)}),
                      flush=True)
    torch.backends.cudnn.benchmark = False
    for name, fn in rows.items():
        if not (name.startswith("conv") or name.startswith("eager")):
            print(json.dumps({"what": name, "ms": round(timed(fn, flush), 4)}), flush=True)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv

        def forward(self, t):
            return torch.relu(self.conv(t)) * 2.0 + 0.5

    compiled = torch.compile(M())
    with torch.no_grad():
        out_c = compiled(x)
        ref = ref_out()
        err = (out_c - ref).abs().max().item()
        print(json.dumps({"what": "torch_compile_forward", "ms": round(timed(lambda: compiled(x), flush), 4),
                          "max_abs_err_vs_eager": err, "out_contiguous": out_c.is_contiguous(),
                          "out_strides": list(out_c.stride())}), flush=True)
        y = F.conv2d(x_cl, w_cl, b, 1, 1)
        print(json.dumps({"what": "channels_last_conv_vs_nchw_max_abs_err",
                          "err": (y - F.conv2d(x, w, b, 1, 1)).abs().max().item()}), flush=True)


if __name__ == "__main__":
    main()
