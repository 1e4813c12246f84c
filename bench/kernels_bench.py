"""Achieved DRAM bandwidth of the memory-bound emitted kernels vs the measured copy bandwidth.

    python bench/kernels_bench.py --out results.json

Every case is far larger than L2 (50 MB on H100), so each run streams from DRAM.  Bytes are
those the kernel must move (each input read once, each output written once); the ceiling is
`torch.empty_like(x).copy_(x)` on 1 GiB, counting read + write.  Times: CUDA events, warm-up,
median of `--iters` runs.  Eager PyTorch runs the same math unfused for comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from kernelstitch.agents.coder.codegen import (
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    ElementwiseOp,
    ElementwiseSpec,
    ReductionSpec,
    TensorArg,
    build_extension_sources,
    emit,
)

from kernelstitch.core.cuda_timing import CudaTimer

E = ElementwiseOp


def specs():
    f32 = "float32"
    return [
        ElementwiseSpec(  # 4 ops: y = tanh(gelu(x * 0.5 + 1))
            "b_chain", (TensorArg("x", f32),),
            (E("mul", ("x", 0.5), "a"), E("add", ("a", 1.0), "b"), E("gelu", ("b",), "c"), E("tanh", ("c",), "y")),
            ("y",), f32,
        ),
        ElementwiseSpec(  # broadcast: relu(x + bias[row vector])
            "b_bias_relu", (TensorArg("x", f32), TensorArg("bias", f32)),
            (E("add", ("x", "bias"), "a"), E("relu", ("a",), "y")), ("y",), f32,
        ),
        ElementwiseSpec(  # per-channel: x * scale[C,1,1] + shift[C,1,1]
            "b_channel", (TensorArg("x", f32), TensorArg("s", f32), TensorArg("t", f32)),
            (E("mul", ("x", "s"), "a"), E("add", ("a", "t"), "y")), ("y",), f32,
        ),
        ReductionSpec("b_softmax", "softmax", (TensorArg("x", f32),), -1, False, f32),
        ReductionSpec("b_softmax_h", "softmax", (TensorArg("x", "float16"),), -1, False, "float16"),
        ReductionSpec(
            "b_layer_norm", "layer_norm", (TensorArg("x", f32), TensorArg("w", f32), TensorArg("b", f32)),
            -1, False, f32, weight="w", bias="b",
        ),
        ReductionSpec("b_row_sum", "sum", (TensorArg("x", f32),), -1, False, f32),
        ReductionSpec("b_col_sum", "sum", (TensorArg("x", f32),), 0, False, f32),
    ]


def time_ms(fn, iters: int, warmup: int = 3) -> float:
    return statistics.median(CudaTimer().samples_ms(fn, runs=iters, warmup=warmup))


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="kernels_bench.json")
    ap.add_argument("--iters", type=int, default=25)
    args = ap.parse_args()
    from torch.utils.cpp_extension import load_inline

    t0 = time.time()
    cpp, cuda, names = build_extension_sources([emit(s) for s in specs()])
    ext = load_inline(
        name="ks_kernels_bench", cpp_sources=[cpp], cuda_sources=[cuda], functions=names,
        extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS), extra_ldflags=list(EXTRA_LDFLAGS),
    )
    build_s = time.time() - t0
    dev = torch.device("cuda")
    torch.manual_seed(0)

    big = torch.randn(256 << 20, device=dev)  # 1 GiB fp32
    copy_ms = time_ms(lambda: torch.empty_like(big).copy_(big), args.iters)
    copy_gbs = 2 * nbytes(big) / copy_ms / 1e6

    cases = []

    def case(name, ours, eager, moved_bytes, check=None):
        if check is not None:
            got, want = ours(), eager()
            torch.testing.assert_close(got.float(), want.float(), rtol=2e-3, atol=2e-3)
        ms = time_ms(ours, args.iters)
        ems = time_ms(eager, args.iters)
        cases.append({
            "case": name, "bytes": moved_bytes, "ms": ms, "gbs": moved_bytes / ms / 1e6,
            "pct_of_copy": 100 * moved_bytes / ms / 1e6 / copy_gbs, "eager_ms": ems,
            "eager_gbs": moved_bytes / ems / 1e6, "speedup_vs_eager": ems / ms,
        })

    x = big
    case("chain4 fp32 256M", lambda: ext.b_chain(x),
         lambda: torch.tanh(F.gelu(x * 0.5 + 1.0)), 2 * nbytes(x), check=True)
    x2 = big.view(16384, 16384)
    bias = torch.randn(16384, device=dev)
    case("bias+relu row-bcast 16Kx16K", lambda: ext.b_bias_relu(x2, bias),
         lambda: torch.relu(x2 + bias), 2 * nbytes(x2) + nbytes(bias), check=True)
    x4 = big.view(64, 256, 128, 128)
    s, t = torch.randn(256, 1, 1, device=dev), torch.randn(256, 1, 1, device=dev)
    case("per-channel affine 64x256x128x128", lambda: ext.b_channel(x4, s, t),
         lambda: x4 * s + t, 2 * nbytes(x4), check=True)
    xs = big[: 64 << 20].view(32768, 2048)
    case("softmax fp32 32Kx2048", lambda: ext.b_softmax(xs), lambda: torch.softmax(xs, -1), 2 * nbytes(xs), check=True)
    xs1 = big[: 64 << 20].view(65536, 1024)
    case("softmax fp32 64Kx1024", lambda: ext.b_softmax(xs1), lambda: torch.softmax(xs1, -1), 2 * nbytes(xs1), check=True)
    xl = big[: 64 << 20].view(8192, 8192)
    case("softmax fp32 8Kx8192", lambda: ext.b_softmax(xl), lambda: torch.softmax(xl, -1), 2 * nbytes(xl), check=True)
    xh = xs.half()
    case("softmax fp16 32Kx2048", lambda: ext.b_softmax_h(xh), lambda: torch.softmax(xh, -1), 2 * nbytes(xh), check=True)
    w, b = torch.randn(2048, device=dev), torch.randn(2048, device=dev)
    case("layer_norm fp32 32Kx2048", lambda: ext.b_layer_norm(xs, w, b),
         lambda: F.layer_norm(xs, (2048,), w, b), 2 * nbytes(xs), check=True)
    xr = big[: 128 << 20].view(32768, 4096)
    case("row sum fp32 32Kx4096", lambda: ext.b_row_sum(xr), lambda: xr.sum(-1), nbytes(xr) + 32768 * 4, check=True)
    case("col sum fp32 4096x32K (dim 0)", lambda: ext.b_col_sum(xr.view(4096, 32768)),
         lambda: xr.view(4096, 32768).sum(0), nbytes(xr) + 32768 * 4, check=True)

    print(f"device: {torch.cuda.get_device_name()}  build {build_s:.0f}s  copy ceiling {copy_gbs:.0f} GB/s "
          f"(1 GiB fp32, read+write, median of {args.iters})")
    print(f"{'case':36s} {'MB':>7s} {'ms':>8s} {'GB/s':>7s} {'%copy':>6s} {'eager ms':>9s} {'eager GB/s':>10s} {'speedup':>7s}")
    for c in cases:
        print(f"{c['case']:36s} {c['bytes'] / 1e6:7.0f} {c['ms']:8.3f} {c['gbs']:7.0f} {c['pct_of_copy']:6.1f} "
              f"{c['eager_ms']:9.3f} {c['eager_gbs']:10.0f} {c['speedup_vs_eager']:7.2f}")
    result = {
        "date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
        "command": "python bench/kernels_bench.py --out " + args.out, "iters": args.iters,
        "copy_gbs": copy_gbs, "cases": cases,
    }
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
