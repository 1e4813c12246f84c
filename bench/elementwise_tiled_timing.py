"""The elementwise kernels' `tiled_any_dim` form (emit_elementwise(spec, tiled_any_dim=True): an
operand stored transposed at any dim read by the tiled kernels over its [N, C, S] view) against the
default (such an operand sends the launch to the scalar kernel) and PyTorch, on a GPU.

    python bench/elementwise_tiled_timing.py [--out tiled.json] [--runs 30]

Cases: level3/48's last step, Y_diag + Y_off over [2048, 2, 64, 8, 64], where Y_diag is torch's
einsum output stored [b, c, h, p, l] (innermost stride 64; 1.07 ms at 1.5 TB/s through the scalar
kernel in the program on an H100, bench/results/2026-12-07-h100-s37), and a + b.t() over
[8192, 8192].  Both forms built from this tree, timed with the Verifier's CUDA-event timer (median
of --runs) after a check against torch (the script fails on a mismatch).  TB/s counts each operand
read once and the output written once.  Written 2026-12-07 (s38), not yet run.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kernel_timing import load_kernel_extension, run_cases, timed_variants

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

CASES = ["level3/48 Y_diag + Y_off [2048, 2, 64, 8, 64], Y_diag stored [b, c, h, p, l]",
         "a + b.t() over [8192, 8192]"]


def build(torch):
    from kernelstitch.agents.coder.codegen.elementwise import emit_elementwise
    from test_elementwise_tiled_gpu import add_scale_spec

    return load_kernel_extension("ks_elementwise_tiled_timing", [
        emit_elementwise(add_scale_spec("add_tiled"), tiled_any_dim=True), emit_elementwise(add_scale_spec("add"))])


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    if k == 0:
        b, c, l, h, p = 2048, 2, 64, 8, 64  # noqa: E741 (the einsum's letters)
        y_diag = torch.randn(b, c, h, p, l, device="cuda").permute(0, 1, 4, 2, 3)  # torch's einsum layout
        args = (y_diag, torch.randn(b, c, l, h, p, device="cuda"))
    else:
        args = (torch.randn(8192, 8192, device="cuda"), torch.randn(8192, 8192, device="cuda").t())
    want = args[0] + args[1]
    nbytes = 3 * want.numel() * 4

    def check(form, got):
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=lambda m: f"{form}: {m}")

    row = {"case": CASES[k]}
    row.update(timed_variants(timer, {"tiled_any_dim": ext.add_tiled, "default": ext.add,
                                      "torch": lambda x, y: x + y}, check, nbytes, runs, *args))
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
