"""The tiled channels-last pooling kernel's (cl4t: NHWC in, contiguous out) tile sized by the
channel count against the fixed 32-position tile, and PyTorch, on a GPU.

    python bench/pool_slices_timing.py [--out pool_slices.json] [--runs 30]

cl4t_wide: more than 32 positions a tile below 64 channels (at 16 channels a 256-thread block had
128 windows), and a tile row stride whose column reads conflict 4 ways at any channel count.  Cases: level2/72's 4x4x4 / stride-4 average over NDHWC [64, 16, 63,
63, 63] after a per-channel add, a 2x2 / stride-2 max over NHWC [128, 16, 254, 254], and a
3x3x3 max over [16, 64, 32, 64, 64] (64 channels: the same tile in both forms, a control).  Forms "wide" (the default) and "narrow"
(emit_pool(cl4t_wide=False)), built from this tree, timed with the Verifier's CUDA-event timer
(median of --runs) with a contiguous and a channels-last output (the tile is the contiguous
output's), checked against torch first (allclose 1e-5).  TB/s counts the input read once and
the output written once.  (At 63487c9 the script also timed windows of over 27 taps loaded in
slices of whole rows: slower, removed; bench/results/2026-12-07-h200-s36.)
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, pool_layout_rows, run_cases

# (label, shape, kind, kernel, stride)
CASES = [
    ("level2/72 avg 4x4x4 s4, x + b", (64, 16, 63, 63, 63), "avg", 4, 4),
    ("max 2x2 s2, 16 channels, x + b", (128, 16, 254, 254), "max", 2, 2),
    ("max 3x3x3 s2 (27 taps), x + b", (16, 64, 32, 64, 64), "max", 3, 2),
]
FORMS = {"wide": "", "narrow": "_narrow"}
FLAGS = {"": {}, "_narrow": {"cl4t_wide": False}}


def _spec(name: str, k: int, keep: bool):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    _, shape, kind, kernel, stride = CASES[k]
    nd = len(shape) - 2
    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    return PoolSpec(name, kind, (x, b), nd, "float32", kernel=(kernel,) * nd, stride=(stride,) * nd,
                    padding=(0,) * nd, dilation=(1,) * nd, keep_channels_last=keep,
                    prologue=(ElementwiseOp("add", ("x", "b"), "t1"),), prologue_out="t1", plane_inputs=("b",))


def build(torch):
    from kernelstitch.agents.coder.codegen.pool import emit_pool

    kernels = []
    for k in range(len(CASES)):
        for keep in (False, True):
            for suffix, flags in FLAGS.items():
                kernels.append(emit_pool(_spec(f"pool{k}_{'cl' if keep else 'nchw'}{suffix}", k, keep), **flags))
    return load_kernel_extension("ks_pool_slices_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    import torch.nn.functional as F

    label, shape, kind, kernel, stride = CASES[k]
    nd = len(shape) - 2
    fmt = torch.channels_last if nd == 2 else torch.channels_last_3d
    x = torch.randn(*shape, device="cuda").contiguous(memory_format=fmt)
    b = torch.randn(shape[1], *(1,) * nd, device="cuda")
    pool = {("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d, ("avg", 3): F.avg_pool3d}[kind, nd]

    def reference(a, c):
        return pool(a + c, kernel, stride)

    want = reference(x, b)
    return pool_layout_rows(torch, ext, timer, runs, k, label, FORMS, reference, want, (x, b), close=True)


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
