"""The channels-last 2x2 pools of level2/35 and 46 with their real prologues and epilogues:
the one-position kernels (cl4 / cl4t) against the row form (cl4r / cl4rt, 4 windows a thread),
and PyTorch, on a GPU.

    python bench/pool_pairs_timing.py [--out pool_pairs.json] [--runs 30]

In their programs these pools ran at 61% (35: hardswish before, mish after) and 75% (46: tanh
between two subtractions) of the DRAM bandwidth on an H100.  NHWC input [128, 128, 126, 126]
(the conv output), a contiguous and a channels-last output; the row form forced with
emit_pool(row_always=True) (the default takes it for these windows only with a channels-last
output, pool.py's _ROW_KEPT_TAPS), each form built from this tree, timed with the Verifier's
CUDA-event timer (median of --runs), checked against torch first (allclose 1e-5).  TB/s counts
the input read once and the output written once.  (At 63487c9 the script also timed the cl4t
kernel pooling two items a call: mixed, removed; bench/results/2026-12-07-h200-s36.)
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, pool_layout_rows, run_cases

SHAPE = (128, 128, 126, 126)
CASES = ["level2/35 max 2x2: hardswish(x + b - 0.5), mish after", "level2/46 avg 2x2: tanh(x + b - 0.5) - 0.2"]
FORMS = {"one": "", "row": "_row"}
FLAGS = {"": {"row_form": False}, "_row": {"row_always": True}}


def _spec(name: str, k: int, keep: bool):
    from kernelstitch.agents.coder.codegen import ElementwiseOp as E
    from kernelstitch.agents.coder.codegen import PoolSpec, TensorArg

    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    common = dict(stride=(2, 2), padding=(0, 0), dilation=(1, 1), keep_channels_last=keep, plane_inputs=("b",))
    if k == 0:
        return PoolSpec(name, "max", (x, b), 2, "float32", kernel=(2, 2), prologue=(
            E("add", ("x", "b"), "t1"), E("sub", ("t1", 0.5), "t2"), E("hardswish", ("t2",), "t3")),
            prologue_out="t3", epilogue=(E("mish", ("acc",), "o"),), epilogue_out="o", **common)
    return PoolSpec(name, "avg", (x, b), 2, "float32", kernel=(2, 2), prologue=(
        E("add", ("x", "b"), "t1"), E("sub", ("t1", 0.5), "t2"), E("tanh", ("t2",), "t3"),
        E("sub", ("t3", 0.2), "t4")), prologue_out="t4", **common)


def build(torch):
    from kernelstitch.agents.coder.codegen.pool import emit_pool

    kernels = [emit_pool(_spec(f"pool{k}_{'cl' if keep else 'nchw'}{suffix}", k, keep), **flags)
               for k in range(len(CASES)) for keep in (False, True) for suffix, flags in FLAGS.items()]
    return load_kernel_extension("ks_pool_pairs_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    import torch.nn.functional as F

    x = torch.randn(*SHAPE, device="cuda").contiguous(memory_format=torch.channels_last)
    b = torch.randn(SHAPE[1], 1, 1, device="cuda")

    def reference(a, c):
        if k == 0:
            return F.mish(F.max_pool2d(F.hardswish(a + c - 0.5), 2, 2))
        return F.avg_pool2d(torch.tanh(a + c - 0.5) - 0.2, 2, 2)

    want = reference(x, b)
    return pool_layout_rows(torch, ext, timer, runs, k, CASES[k], FORMS, reference, want, (x, b), close=True)


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
