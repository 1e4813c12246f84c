"""The channels-last pooling kernels' row form (cl4r / cl4rt: V output columns x 4 channels a
thread) against the one-position form it replaced (cl4 / cl4t) and PyTorch, on a GPU; and the
kept row kernel's strip form (cl4r pooling R output rows a thread, each input row loaded once for
the strip's rows that hold it).

    python bench/pool_row_timing.py [--out pool_row.json] [--runs 30]

The windows and NHWC input shapes of level3/6 (3x3 / stride 1 / padding 1 over [10, 480, 224,
224]) and level2/35 (2x2 over [128, 128, 126, 126]), each with a contiguous (NCHW) output
(cl4rt / cl4t, what a plan returns to the caller) and a channels-last one (cl4r / cl4, what a
plan keeps for the next convolution), and a relu(x + b) prologue (b per channel) on the first.
Forms, all built from this tree: `row` (`emit_pool(spec)`, row_rows=1: a row a thread, the
default), `strip2` / `strip4` (`row_rows=2` / `4`: level3/6's rows overlap, so the strip loads
fewer rows, level2/35's 2x2 / stride-2 rows do not; mixed on an H100 in s38, bench/results/
2026-12-07-h100-s38, so not the default), and
`one_position` (`emit_pool(spec, row_form=False)`); a contiguous output never takes the strip
(cl4rt: the strip forms build the `row` kernel there).  Timed with the Verifier's CUDA-event
timer (median of --runs), compared with torch (the script fails on a mismatch).  TB/s counts the
input read once and the output written once.  (s37 also timed AlexNet's 3x3 / stride-2 and
level2/82's 4x4 / stride-4 windows, which stay on the cl4 kernels, and `rows_together`
(emit_pool(row_group=KH)): level3/6 NCHW 1.541 -> 1.531 ms, NHWC 0.901 -> 1.088 on an H100,
bench/results/2026-12-07-h100-s37.)
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, pool_layout_rows, run_cases

# (label, [N, C, H, W], kernel, stride, padding, prologue)
CASES = [
    ("level3/6 3x3 s1 p1", (10, 480, 224, 224), 3, 1, 1, False),
    ("level3/6 3x3 s1 p1, relu(x + b)", (10, 480, 224, 224), 3, 1, 1, True),
    ("level2/35 2x2 s2", (128, 128, 126, 126), 2, 2, 0, False),
]
# form -> (extension suffix, emit_pool keywords)
FORMS = {"row": ("_row", {"row_rows": 1}), "strip2": ("_s2", {"row_rows": 2}), "strip4": ("_s4", {"row_rows": 4}),
         "one_position": ("_old", {"row_form": False})}


def _spec(name: str, kernel: int, stride: int, pad: int, prologue: bool, keep: bool):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    x, b = TensorArg("x", "float32"), TensorArg("b", "float32")
    extra = dict(prologue=(ElementwiseOp("add", ("x", "b"), "t1"), ElementwiseOp("relu", ("t1",), "t2")),
                 prologue_out="t2", plane_inputs=("b",)) if prologue else {}
    return PoolSpec(name, "max", (x, b) if prologue else (x,), 2, "float32", kernel=(kernel, kernel),
                    stride=(stride, stride), padding=(pad, pad), dilation=(1, 1), keep_channels_last=keep, **extra)


def build(torch):
    from kernelstitch.agents.coder.codegen.pool import emit_pool

    kernels = []
    for k, (_, _, kernel, stride, pad, prologue) in enumerate(CASES):
        for keep in (False, True):
            name = f"pool{k}_{'cl' if keep else 'nchw'}"
            for suffix, keywords in FORMS.values():
                kernels.append(emit_pool(_spec(name + suffix, kernel, stride, pad, prologue, keep), **keywords))
    return load_kernel_extension("ks_pool_row_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    import torch.nn.functional as F

    label, shape, kernel, stride, pad, prologue = CASES[k]
    x = torch.randn(*shape, device="cuda").contiguous(memory_format=torch.channels_last)
    b = torch.randn(shape[1], 1, 1, device="cuda")
    args = (x, b) if prologue else (x,)

    def reference(*a):
        return F.max_pool2d(torch.relu(a[0] + a[1]) if prologue else a[0], kernel, stride, pad)

    want = reference(*args)
    return pool_layout_rows(torch, ext, timer, runs, k, label, {form: suffix for form, (suffix, _) in FORMS.items()}, reference,
                            want, args)


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
