"""The elementwise kernels' `strided_vec` form (emit_elementwise(spec, strided_vec=True): the
vector kernel reads an operand of general strides whose consecutive elements are contiguous, one
offset per VEC elements) against the default (such an operand sends the launch to the scalar
kernel) and PyTorch, on a GPU.

    python bench/elementwise_strided_timing.py [--out strided.json] [--runs 30]

Cases: level3/48's segsum, exp(masked_fill(x[..., :, None] - x[..., None, :], ~tril, -inf))
over x of [2048, 8, 2, 64] (a 537 MB output: 1.24 ms through the scalar kernel in the program on
an H100, bench/results/2026-12-07-h100-s37), and a row broadcast a + b[:, None, :] over
[256, 64, 4096].  Both forms built from this tree, timed with the Verifier's CUDA-event timer
(median of --runs) after a check against torch (the script fails on a mismatch).  TB/s counts
each tensor operand read once and the output written once.  Run on an H100 in s38
(bench/results/2026-12-07-h100-s38): segsum 1.246 -> 0.420 ms; strided_vec is now the default,
so `default` here builds strided_vec=False, the kernel it replaced.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from kernel_timing import load_kernel_extension, run_cases, timed_variants

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

CASES = ["level3/48 segsum [2048, 8, 2, 64] -> [.., 64, 64]", "a + b[:, None, :] over [256, 64, 4096]"]


def build(torch):
    from kernelstitch.agents.coder.codegen.elementwise import emit_elementwise
    from test_elementwise_strided_gpu import add_spec, segsum_spec

    return load_kernel_extension("ks_elementwise_strided_timing", [
        emit_elementwise(segsum_spec("segsum_sv"), strided_vec=True),
        emit_elementwise(segsum_spec("segsum"), strided_vec=False),
        emit_elementwise(add_spec("add_sv"), strided_vec=True), emit_elementwise(add_spec("add"), strided_vec=False)])


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    if k == 0:
        x = torch.randn(2048, 8, 2, 64, device="cuda").cumsum(-1)
        mask = torch.tril(torch.ones(64, 64, dtype=torch.bool, device="cuda"))
        args = (x[..., :, None], x[..., None, :], mask)

        def reference(a, b, m):
            return torch.exp((a - b).masked_fill(~m, -math.inf))

        forms = {"strided_vec": ext.segsum_sv, "default": ext.segsum}
        nbytes = (x.numel() + mask.numel() + x.numel() * 64) * 4
    else:
        a = torch.randn(256, 64, 4096, device="cuda")
        b = torch.randn(256, 4096, device="cuda")
        args = (a, b[:, None, :])

        def reference(a, b):
            return a + b

        forms = {"strided_vec": ext.add_sv, "default": ext.add}
        nbytes = (2 * a.numel() + b.numel()) * 4
    want = reference(*args)

    def check(form, got):
        # (the kernels' exp is the fast one: within 2e-5 of torch's)
        torch.testing.assert_close(got, want, rtol=2e-5, atol=0, equal_nan=True, msg=lambda m: f"{form}: {m}")

    row = {"case": CASES[k]}
    row.update(timed_variants(timer, forms | {"torch": reference}, check, nbytes, runs, *args))
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
