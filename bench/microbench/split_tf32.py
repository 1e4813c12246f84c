"""Is an fp32 GEMM faster as three TF32 tensor-core products of split operands (3xTF32), at fp32's
accuracy?  x @ W^T with each operand split into a TF32-exact high part and its fp32 remainder:
  x W^T ~= x_hi W_hi^T + x_hi W_lo^T + x_lo W_hi^T      (x_lo W_lo^T, ~2^-22 relative, dropped)
High parts are exact in TF32, so whatever rounding the GEMM kernel applies to its inputs only
touches the remainders (second order).  Times, on one GPU with CUDA events (L2 flushed, median of
15): strict fp32 (TF32 off, what eager and torch.compile run), plain TF32, and 3xTF32 including
the splits of both operands per call, and with the high-part product in K chunks; errors of fp32,
TF32 and 3xTF32 from a float64 product (max abs error / RMS of the result, the Verifier's atol
scale).  Shapes: KernelBench level 2's GEMMs.
Prints one JSON line per shape.

Usage (GPU machine): python bench/microbench/split_tf32.py
"""

from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F

from kernelstitch.core.cuda_timing import CudaTimer

SHAPES = ((1024, 8192, 8192), (2048, 8192, 8192), (16384, 4096, 4096), (32768, 1024, 4096),
          (128, 16384, 16384))  # (M, K, N)
CHUNKS = (256, 512, 1024, 2048)  # K chunks of the high-part product


def split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High part: t rounded to TF32 (10 mantissa bits, round half away); low part: the rest."""
    bits = t.view(torch.int32)
    hi = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return hi, t - hi


def gemm_3xtf32(x: torch.Tensor, w: torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """The two remainder products first, then x_hi W_hi in K chunks of `chunk` (None: one), each
    added in fp32 by cuBLAS's epilogue: the tensor cores accumulate with truncation, an error that
    grows with the number of accumulations (cuda/ks_gemm.h chunks the same way)."""
    x_hi, x_lo = split(x)
    w_hi, w_lo = split(w)
    y = F.linear(x_lo, w_hi)
    y.addmm_(x_hi, w_lo.t())
    k = x.shape[1]
    step = chunk or k
    for k0 in range(0, k, step):
        y.addmm_(x_hi[:, k0:k0 + step], w_hi[:, k0:k0 + step].t())
    return y


def timed(fn, flush) -> float:
    return statistics.median(CudaTimer().samples_ms(fn, runs=15, warmup=3, flush=lambda: flush.fill_(1)))


def error(y: torch.Tensor, exact: torch.Tensor) -> float:
    return float((y.double() - exact).abs().max() / exact.pow(2).mean().sqrt())


def measure(m: int, k: int, n: int, flush: torch.Tensor) -> dict:
    dev = flush.device
    x = torch.randn(m, k, device=dev)
    w = torch.randn(n, k, device=dev) / k ** 0.5
    torch.backends.cuda.matmul.allow_tf32 = False
    fp32_ms = timed(lambda: F.linear(x, w), flush)
    y32 = F.linear(x, w)
    torch.backends.cuda.matmul.allow_tf32 = True
    tf32_ms = timed(lambda: F.linear(x, w), flush)
    split_ms = timed(lambda: (split(x), split(w)), flush)
    x3_ms = timed(lambda: gemm_3xtf32(x, w), flush)
    y3 = gemm_3xtf32(x, w)
    chunked = {c: gemm_3xtf32(x, w, c) for c in CHUNKS if c < k}
    chunk_ms = {c: timed(lambda c=c: gemm_3xtf32(x, w, c), flush) for c in chunked}
    ytf = F.linear(x, w)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = slice(0, min(m, 256))  # float64 GEMM on a row sample: cheap, same statistics
    exact = F.linear(x[rows].double(), w.double())
    return {"M": m, "K": k, "N": n, "fp32_ms": round(fp32_ms, 4), "tf32_ms": round(tf32_ms, 4),
            "split_both_ms": round(split_ms, 4), "x3tf32_ms": round(x3_ms, 4),
            "speedup_3x_vs_fp32": round(fp32_ms / x3_ms, 3),
            "err_fp32": error(y32[rows], exact), "err_3xtf32": error(y3[rows], exact),
            "err_tf32": error(ytf[rows], exact),
            "chunked": {c: {"ms": round(chunk_ms[c], 4), "err": error(y[rows], exact)}
                        for c, y in chunked.items()}}


def main() -> None:
    dev = torch.device("cuda")
    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.uint8, device=dev)
    for m, k, n in SHAPES:
        print(json.dumps(measure(m, k, n, flush)), flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
