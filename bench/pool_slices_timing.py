"""The channels-last 4-channel pooling kernels' window slices and wide tiles against the forms they
replaced, and PyTorch, on a GPU.

    python bench/pool_slices_timing.py [--out pool_slices.json] [--runs 30]

cl4_slices: a window of over 27 taps loads R whole rows (<= 12 taps) before their arithmetic,
instead of one tap at a time; cl4t_wide: the tiled kernel (contiguous output) holds more than 32
positions a tile at fewer than 128 channels.  Cases: level2/72's 4x4x4 / stride-4 average over
NDHWC [64, 16, 63, 63, 63] after a per-channel add (both changes), a 2x2 / stride-2 max over NHWC
[128, 16, 254, 254] (fewer than 128 channels: the tile alone), and a 3x3x3 max over [16, 64, 32,
64, 64] (27 taps: neither applies, a control).  Forms: "new" (both), "slices_only" (32-position
tiles as before), "old" (neither), each built from this tree with emit_pool's flags, timed with the Verifier's CUDA-event timer (median of --runs) with a contiguous and a
channels-last output, checked against torch first (allclose 1e-5: the window sums' order
differs).  TB/s counts the input read once and the output written once.
"""

from __future__ import annotations

import sys

from kernel_timing import pool_layout_rows, run_cases

# (label, shape, kind, kernel, stride)
CASES = [
    ("level2/72 avg 4x4x4 s4, x + b", (64, 16, 63, 63, 63), "avg", 4, 4),
    ("max 2x2 s2, 16 channels, x + b", (128, 16, 254, 254), "max", 2, 2),
    ("max 3x3x3 s2 (27 taps), x + b", (16, 64, 32, 64, 64), "max", 3, 2),
]
FORMS = {"new": "", "slices_only": "_slices", "old": "_old"}
FLAGS = {"": {}, "_slices": {"cl4t_wide": False}, "_old": {"cl4_slices": False, "cl4t_wide": False}}


def _spec(name: str, k: int, keep: bool):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    _, shape, kind, kernel, stride = CASES[k]
    nd = len(shape) - 2
    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    return PoolSpec(name, kind, (x, b), nd, "float32", kernel=(kernel,) * nd, stride=(stride,) * nd,
                    padding=(0,) * nd, dilation=(1,) * nd, keep_channels_last=keep,
                    prologue=(ElementwiseOp("add", ("x", "b"), "t1"),), prologue_out="t1", plane_inputs=("b",))


def build(torch):
    from kernelstitch.agents.coder.codegen import EXTRA_CFLAGS, EXTRA_CUDA_CFLAGS, EXTRA_LDFLAGS
    from kernelstitch.agents.coder.codegen.common import build_extension_sources
    from kernelstitch.agents.coder.codegen.pool import emit_pool
    from torch.utils.cpp_extension import load_inline

    kernels = []
    for k in range(len(CASES)):
        for keep in (False, True):
            for suffix, flags in FLAGS.items():
                kernels.append(emit_pool(_spec(f"pool{k}_{'cl' if keep else 'nchw'}{suffix}", k, keep), **flags))
    cpp, cuda, functions = build_extension_sources(kernels)
    return load_inline(name="ks_pool_slices_timing", cpp_sources=[cpp], cuda_sources=[cuda], functions=functions,
                       extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


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
