"""The contiguous-input (NCHW) pooling plane kernel's 16-byte loads on rows padded by a multiple
of 4 (`vl`, the default from 2026-12-06 to 2026-12-07) against the form it replaced (`main`: 16-byte loads on
unpadded rows only), the finish of windows inside the input with a constant divisor (`inside`:
the default since 2026-12-07; `vl` is `emit_pool(plane_inside=False)`) and PyTorch, on a GPU.

    python bench/pool_plane_vl_timing.py [--out pool_plane_vl.json] [--runs 30]

The windows and input shapes of level1/41 (max 1-D, 8 taps at dilation 3, stride 1, padding 4
over [64, 192, 65536]), level1/44 (avg 1-D, 8 taps, stride 1, padding 4 over [64, 128, 65536]),
level1/42 (max 2-D 4x4, stride 1, padding 1 over [32, 64, 512, 512]), a 3x3 / stride 1 /
padding 1 max pool with a relu(x + b) prologue (b per channel) over [16, 64, 400, 400] (the
cases of bench/pool_lanes_timing.py on branch pool-plane-lanes), and level3/13's 2x2 / stride 2
average pool after relu(x + b) over [128, 32, 256, 256].  Both forms are built from this tree
(`emit_pool(spec, plane_vl_padded=...)`), timed with the Verifier's CUDA-event timer (median of
--runs) and compared with torch (max: equal; avg: allclose; the script fails on a mismatch).
TB/s counts the input read once and the output written once.  `strip2` / `strip4`: the default
(`inside`) pooling 2 / 4 output rows a thread (`emit_pool(plane_rows=...)`; on an H100 in s38 level1/42
3.349 -> 2.718 ms at 4 rows: the default since for overlapping rows, so `inside` passes
plane_rows=1; the 1-D cases build the `inside` kernel there).  `smem1d`: `emit_pool(plane_smem=True)`,
level1/41's window through the shared-memory 1-D kernel (written in s38, not yet run; the other
cases build the default kernels there).  (Branch pool-plane-vl's first
commit timed two more forms, a warp's outputs stored 32 consecutive values at a time through
shared memory, with and without these loads: slower on every case, bench/results/2026-12-06-h100-s28.)
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, run_cases, timed_variants

# (label, kind, input shape, kernel, stride, padding, dilation, prologue)
CASES = [
    ("level1/41 max1d k8 s1 p4 d3", "max", (64, 192, 65536), (8,), (1,), (4,), (3,), False),
    ("level1/44 avg1d k8 s1 p4", "avg", (64, 128, 65536), (8,), (1,), (4,), (1,), False),
    ("level1/42 max2d k4 s1 p1", "max", (32, 64, 512, 512), (4, 4), (1, 1), (1, 1), (1, 1), False),
    ("max2d k3 s1 p1, relu(x + b)", "max", (16, 64, 400, 400), (3, 3), (1, 1), (1, 1), (1, 1), True),
    ("level3/13 avg2d k2 s2, relu(x + b)", "avg", (128, 32, 256, 256), (2, 2), (2, 2), (0, 0), (1, 1), True),
]
# form -> emit_pool's keywords: vl (main's default until 2026-12-07), its predecessor (16-byte loads on unpadded
# rows only) and the windows-inside-the-input finish (plane_inside, the default since 2026-12-07)
FORMS = {"main": {"plane_vl_padded": False, "plane_inside": False, "plane_rows": 1},
         "vl": {"plane_inside": False, "plane_rows": 1}, "inside": {"plane_inside": True, "plane_rows": 1},
         "strip2": {"plane_rows": 2}, "strip4": {"plane_rows": 4}, "smem1d": {"plane_smem": True}}


def _spec(name: str, case: tuple):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    _, kind, shape, kernel, stride, pad, dil, prologue = case
    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    extra = dict(prologue=(ElementwiseOp("add", ("x", "b"), "t1"), ElementwiseOp("relu", ("t1",), "t2")),
                 prologue_out="t2", plane_inputs=("b",)) if prologue else {}
    return PoolSpec(name, kind, (x, b) if prologue else (x,), len(shape) - 2, "float32", kernel=kernel,
                    stride=stride, padding=pad, dilation=dil, **extra)


def build(torch):
    from kernelstitch.agents.coder.codegen.pool import emit_pool

    kernels = []
    for k, case in enumerate(CASES):
        for form, keywords in FORMS.items():
            kernels.append(emit_pool(_spec(f"pool{k}_{form}", case), **keywords))
            assert "#if 1\ntemplate <int KIND, bool VL>" in kernels[-1].cuda, case[0]  # the plane kernel is emitted
    return load_kernel_extension("ks_pool_plane_vl_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
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
    variants = {form: getattr(ext, f"pool{k}_{form}") for form in FORMS} | {"torch": reference}
    row.update(timed_variants(timer, variants, check, (x.numel() + want.numel()) * 4, runs, *args))
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
