"""The contiguous-input pooling tile kernel (overlapping windows staged through shared memory)
against the register plane kernel it would replace and PyTorch, on a GPU.

    python bench/pool_tile_timing.py [--out pool_tile.json] [--runs 30]

The windows and NCHW input shapes of level1/41 (max 1-D, 8 taps at dilation 3, stride 1, padding
4 over [64, 192, 65536]), level1/44 (avg 1-D, 8 taps, stride 1, padding 4 over [64, 128, 65536]),
level1/42 (max 2-D 4x4, stride 1, padding 1 over [32, 64, 512, 512]) and a ResNet-style 3x3 /
stride 2 / padding 1 max pool with a relu(x + b) prologue (b per channel) over [128, 64, 112,
112].  Both forms are built from this tree (`emit_pool(spec, tile_form=True)` for the tile
kernel), timed with the Verifier's CUDA-event timer (median of --runs) and compared with torch
(max: equal; avg: allclose; the script fails on a mismatch).  TB/s counts the input read once and
the output written once.
"""

from __future__ import annotations

import json
import sys

from kernel_timing import save, timed_variants, timing_args

# (label, kind, input shape, kernel, stride, padding, dilation, prologue)
CASES = [
    ("level1/41 max1d k8 s1 p4 d3", "max", (64, 192, 65536), (8,), (1,), (4,), (3,), False),
    ("level1/44 avg1d k8 s1 p4", "avg", (64, 128, 65536), (8,), (1,), (4,), (1,), False),
    ("level1/42 max2d k4 s1 p1", "max", (32, 64, 512, 512), (4, 4), (1, 1), (1, 1), (1, 1), False),
    ("resnet max2d k3 s2 p1, relu(x + b)", "max", (128, 64, 112, 112), (3, 3), (2, 2), (1, 1), (1, 1), True),
]


def _spec(name: str, case: tuple):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    _, kind, shape, kernel, stride, pad, dil, prologue = case
    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    extra = dict(prologue=(ElementwiseOp("add", ("x", "b"), "t1"), ElementwiseOp("relu", ("t1",), "t2")),
                 prologue_out="t2", plane_inputs=("b",)) if prologue else {}
    return PoolSpec(name, kind, (x, b) if prologue else (x,), len(shape) - 2, "float32", kernel=kernel,
                    stride=stride, padding=pad, dilation=dil, **extra)


def build(torch):
    from kernelstitch.agents.coder.codegen import EXTRA_CFLAGS, EXTRA_CUDA_CFLAGS, EXTRA_LDFLAGS
    from kernelstitch.agents.coder.codegen.common import build_extension_sources
    from kernelstitch.agents.coder.codegen.pool import emit_pool
    from torch.utils.cpp_extension import load_inline

    kernels = []
    for k, case in enumerate(CASES):
        kernels.append(emit_pool(_spec(f"pool{k}_tile", case), tile_form=True))
        kernels.append(emit_pool(_spec(f"pool{k}_plane", case)))
        assert "_tile_kernel<" in kernels[-2].cuda, case[0]
    cpp, cuda, functions = build_extension_sources(kernels)
    return load_inline(name="ks_pool_tile_timing", cpp_sources=[cpp], cuda_sources=[cuda], functions=functions,
                       extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


def measure(torch, ext, timer, runs: int, k: int) -> dict:
    import torch.nn.functional as F

    label, kind, shape, kernel, stride, pad, dil, prologue = CASES[k]
    nd = len(shape) - 2
    x = torch.rand(*shape, device="cuda")
    b = torch.randn(shape[1], *(1,) * nd, device="cuda")
    args = (x, b) if prologue else (x,)

    def reference(*a):
        src = torch.relu(a[0] + a[1]) if prologue else a[0]
        pool = getattr(F, f"{kind}_pool{nd}d")
        return pool(src, kernel, stride, pad, dil) if kind == "max" else pool(src, kernel, stride, pad)

    want = reference(*args)

    def check(form, got):
        same = torch.equal(got, want) if kind == "max" else torch.allclose(got, want, rtol=1e-5, atol=1e-6)
        if not same:
            raise SystemExit(f"{form} differs from torch on {label}")

    row = {"case": label, "input": list(shape)}
    cases = {"tile": getattr(ext, f"pool{k}_tile"), "plane": getattr(ext, f"pool{k}_plane"), "torch": reference}
    row.update(timed_variants(timer, cases, check, (x.numel() + want.numel()) * 4, runs, *args))
    return row


def main() -> int:
    args = timing_args(__doc__)

    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    ext = build(torch)
    timer = CudaTimer()
    results = []
    for k in range(len(CASES)):
        row = measure(torch, ext, timer, args.runs, k)
        results.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    save(args.out, torch.cuda.get_device_name(), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
