"""Would convolutions gain from 3xTF32 as the GEMMs did (bench/microbench/split_tf32.py)?

For the first convolution of each KernelBench level-2 conv problem (groups 1; the problem's own
module and inputs), times on one GPU with CUDA events (L2 flushed, median of 10): strict fp32
(what eager and torch.compile run in the Verifier's setting), TF32, and two 3xTF32 forms, both
including the splitting of input and weight:
  cat:   one convolution over the channels laid side by side, conv([x_lo, x_hi, x_hi],
         [W_hi, W_lo, W_hi]) (a convolution is linear in its input channels);
  three: conv(x_lo, W_hi) + conv(x_hi, W_lo) + conv(x_hi, W_hi), added in fp32.
Errors: largest |error| from a float64 convolution of the first two batch items, over the RMS of
that result (the Verifier's atol scale).  One JSON line per problem.

Usage (GPU machine): python bench/microbench/conv_split_tf32.py KERNELBENCH_DIR [LIMIT]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from split_tf32 import split  # the GEMM microbenchmark's split, this folder (run as a script)

from kernelstitch.core.cuda_timing import CudaTimer
from kernelstitch.core.problem import import_file

CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


def conv_fn(mod: nn.Module):
    """(x, w, bias) -> mod's convolution with those operands."""
    if isinstance(mod, nn.modules.conv._ConvTransposeNd):
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[len(mod.kernel_size)]
        return lambda x, w, b: fn(x, w, b, mod.stride, mod.padding, mod.output_padding, mod.groups, mod.dilation)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[len(mod.kernel_size)]
    return lambda x, w, b: fn(x, w, b, mod.stride, mod.padding, mod.dilation, mod.groups)


def conv_cat(mod, conv, x, w, b):
    x_hi, x_lo = split(x)
    w_hi, w_lo = split(w)
    w_dim = 0 if isinstance(mod, nn.modules.conv._ConvTransposeNd) else 1
    return conv(torch.cat([x_lo, x_hi, x_hi], 1), torch.cat([w_hi, w_lo, w_hi], w_dim), b)


def conv_three(conv, x, w, b):
    x_hi, x_lo = split(x)
    w_hi, w_lo = split(w)
    y = conv(x_lo, w_hi, None)
    y += conv(x_hi, w_lo, None)
    return y.add_(conv(x_hi, w_hi, b))


def measure(path: Path, flush: torch.Tensor) -> dict | None:
    problem = import_file(path)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda()
    mod = next((m for m in model.modules() if isinstance(m, CONVS) and m.groups == 1), None)
    if mod is None:
        return None
    x = problem.get_inputs()[0].cuda()
    w, b = mod.weight.detach(), None if mod.bias is None else mod.bias.detach()
    conv = conv_fn(mod)

    def timed(fn) -> float:
        return statistics.median(CudaTimer().samples_ms(fn, runs=10, warmup=2, flush=lambda: flush.fill_(1)))

    with torch.no_grad():
        torch.backends.cudnn.allow_tf32 = False
        fp32_ms, y32 = timed(lambda: conv(x, w, b)), conv(x[:2], w, b)
        torch.backends.cudnn.allow_tf32 = True
        tf32_ms, ytf = timed(lambda: conv(x, w, b)), conv(x[:2], w, b)
        cat_ms, ycat = timed(lambda: conv_cat(mod, conv, x, w, b)), conv_cat(mod, conv, x[:2], w, b)
        three_ms, ythree = timed(lambda: conv_three(conv, x, w, b)), conv_three(conv, x[:2], w, b)
        torch.backends.cudnn.allow_tf32 = False
        exact = conv(x[:2].double(), w.double(), None if b is None else b.double())
    rms = exact.pow(2).mean().sqrt()

    def err(y):
        return float((y.double() - exact).abs().max() / rms)

    reduce_len = w.shape[0 if isinstance(mod, nn.modules.conv._ConvTransposeNd) else 1] * w[0, 0].numel()
    return {"problem": path.stem, "conv": type(mod).__name__, "x": list(x.shape), "w": list(w.shape),
            "reduce_len": reduce_len, "fp32_ms": round(fp32_ms, 4), "tf32_ms": round(tf32_ms, 4),
            "cat3x_ms": round(cat_ms, 4), "three3x_ms": round(three_ms, 4),
            "speedup_cat": round(fp32_ms / cat_ms, 3), "speedup_three": round(fp32_ms / three_ms, 3),
            "err_fp32": err(y32), "err_tf32": err(ytf), "err_cat": err(ycat), "err_three": err(ythree)}


def main() -> None:
    root = Path(sys.argv[1]) / "level2"
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    files = sorted((p for p in root.glob("*.py") if "Conv" in p.name), key=lambda p: int(p.name.split("_")[0]))
    for path in files[:limit]:
        try:
            row = measure(path, flush)
        except Exception as exc:  # one problem's failure (memory, an odd module) is a line, not the end
            row = {"problem": path.stem, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
        if row is not None:
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
