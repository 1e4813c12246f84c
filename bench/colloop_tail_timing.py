"""The column loop's batched tail (ReductionVariant(colloop_tail_batch=True): a strided
reduction's last R % 8 values loaded as one predicated batch) against the default (one value at
a time) and PyTorch, on a GPU.

    python bench/colloop_tail_timing.py [--out colloop_tail.json] [--runs 30]

Cases: level2/24's min over a conv3d output's depth (channels-last [128, 24, 22, 30, 30]: outer
128, R 22, inner 21,600; 0.11 ms at 77% of DRAM bandwidth in its program on an H100,
bench/results/2026-12-07-h100-s38), the same as a sum, and a softmax over R = 13 of [16, 13, 65536].
Both forms built from this tree, timed with the Verifier's CUDA-event timer (median of --runs)
after a check against torch (the script fails on a mismatch).  TB/s counts the input read once
(twice for softmax) and the output written once.  Written 2026-12-07 (s38), not yet run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernel_timing import load_kernel_extension, run_cases, timed_variants

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

CASES = [("amin", (128, 22, 21600)), ("sum", (128, 22, 21600)), ("softmax", (16, 13, 65536))]


def build(torch):
    from kernelstitch.agents.coder.codegen.reduction import emit_reduction
    from kernelstitch.agents.coder.codegen.reduction.context import ReductionVariant
    from test_colloop_tail_gpu import _spec

    batch = ReductionVariant(colloop_tail_batch=True)
    kernels = []
    for kind in sorted({kind for kind, _ in CASES}):
        kernels += [emit_reduction(_spec(kind, f"tb_{kind}"), batch), emit_reduction(_spec(kind, f"one_{kind}"))]
    return load_kernel_extension("ks_colloop_tail_timing", kernels)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    kind, shape = CASES[k]
    x = torch.randn(*shape, device="cuda")
    if kind == "softmax":
        def reference(v):
            return torch.softmax(v, 1)
    else:
        def reference(v):
            return getattr(torch, kind)(v, 1, keepdim=True)
    want = reference(x)
    nbytes = (x.numel() * (2 if kind == "softmax" else 1) + want.numel()) * 4

    def check(form, got):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=lambda m: f"{form}: {m}")

    row = {"case": f"{kind} over dim 1 of {list(shape)}"}
    row.update(timed_variants(timer, {"tail_batch": getattr(ext, f"tb_{kind}"), "default": getattr(ext, f"one_{kind}"),
                                      "torch": reference}, check, nbytes, runs, x))
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
