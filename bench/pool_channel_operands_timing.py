"""The channels-last pools' per-channel prologue operands read as one 16-byte load for 4 channels
(ks_ld_planes4) against an offset a channel and operand (the form it replaced) and PyTorch.

    python bench/pool_channel_operands_timing.py [--out pool_channel_operands.json] [--runs 30]

Cases: level3/27 RegNet's first pool (batch_norm + ReLU before a 2x2 / stride-2 max pool over
[8, 64, 224, 224]: conv bias, mean, rstd, weight and bias, five operands per channel) and AlexNet's
first (relu(x + b) before 3x3 / stride 2 over [1024, 96, 55, 55]), each with a channels-last output
(cl4, what a plan keeps for the next convolution) and a contiguous one (cl4t).  Both forms are
built from this tree (`emit_pool(spec, channel_vec=False)` for the old one), timed with the
Verifier's CUDA-event timer (median of --runs) and checked against torch (the script fails on a
mismatch).  TB/s counts the input read once and the output written once.
"""

from __future__ import annotations

import sys

from kernel_timing import load_kernel_extension, pool_layout_rows, run_cases

# (label, [N, C, H, W], kernel, stride, per-channel operands of the prologue)
CASES = [
    ("level3/27 2x2 s2, bn + relu", (8, 64, 224, 224), 2, 2, 5),
    ("level3/5 3x3 s2, relu(x + b)", (1024, 96, 55, 55), 3, 2, 1),
]


def _spec(name: str, kernel: int, stride: int, operands: int, keep: bool):
    from kernelstitch.agents.coder.codegen import ElementwiseOp, PoolSpec, TensorArg

    x = TensorArg("x", "float32")
    if operands == 1:
        ops = (ElementwiseOp("add", ("x", "b"), "t1"), ElementwiseOp("relu", ("t1",), "t2"))
        extra = (TensorArg("b", "float32"),)
    else:  # relu(((x + cb) - mean) * rstd * w + bb), as RegNet's plan
        ops = (ElementwiseOp("add", ("x", "cb"), "t1"), ElementwiseOp("sub", ("t1", "mean"), "t2"),
               ElementwiseOp("mul", ("t2", "rstd"), "t3"), ElementwiseOp("mul", ("t3", "w"), "t4"),
               ElementwiseOp("add", ("t4", "bb"), "t5"), ElementwiseOp("relu", ("t5",), "t6"))
        extra = tuple(TensorArg(n, "float32") for n in ("cb", "mean", "rstd", "w", "bb"))
    return PoolSpec(name, "max", (x, *extra), 2, "float32", kernel=(kernel, kernel), stride=(stride, stride),
                    padding=(0, 0), dilation=(1, 1), keep_channels_last=keep, prologue=ops,
                    prologue_out=ops[-1].out, plane_inputs=tuple(t.name for t in extra))


def build(torch):
    from kernelstitch.agents.coder.codegen.pool import emit_pool

    kernels = []
    for k, (_, _, kernel, stride, operands) in enumerate(CASES):
        for keep in (False, True):
            name = f"pool{k}_{'cl' if keep else 'nchw'}"
            kernels.append(emit_pool(_spec(name, kernel, stride, operands, keep)))
            kernels.append(emit_pool(_spec(name + "_old", kernel, stride, operands, keep), channel_vec=False))
    return load_kernel_extension("ks_pool_channel_operands_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    import torch.nn.functional as F

    label, shape, kernel, stride, operands = CASES[k]
    x = torch.randn(*shape, device="cuda").contiguous(memory_format=torch.channels_last)
    per_channel = [torch.randn(shape[1], 1, 1, device="cuda") for _ in range(operands)]
    if operands == 1:
        def source(x, b):
            return torch.relu(x + b)
    else:
        def source(x, cb, mean, rstd, w, bb):
            return torch.relu(((x + cb) - mean) * rstd * w + bb)
    args = (x, *per_channel)

    def reference(*a):
        return F.max_pool2d(source(*a), kernel, stride)

    return pool_layout_rows(torch, ext, timer, runs, k, label, {"vec4": "", "per_channel": "_old"}, reference,
                            reference(*args), args, close=True)


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
