"""The contraction kernel's pipelined k loop (`ContractionSpec.pipelined`: the next k step's
offsets and operand values fetched while one multiplies) against the default loop and
torch.einsum, on a GPU: level3/49's chunk-state einsum at its sizes (read as latency-bound in
Nsight Compute, 2026-12-07) and a bmm with a long sum.  Each form is checked against torch
first.

    python bench/contraction_pipelined_timing.py [--out results.json] [--runs N]
"""

from __future__ import annotations

import sys

from kernel_timing import run_cases, timed_variants

# label, equation, operand shapes, sides, batch, m, n, k roles, tile, operand builder
CASES = [
    ("level3/49 chunk states bclhn,bhcl,bclhp->bchpn", "bclhn,bhcl,bclhp->bchpn",
     ((2048, 2, 64, 8, 16), (2048, 8, 2, 64), (2048, 2, 64, 8, 64)), (1, 1, 0), "bch", "p", "n", "l", (64, 16)),
    ("bmm 32 x 256 x 1024 x 256", "bij,bjk->bik", ((32, 256, 1024), (32, 1024, 256)), (0, 1), "b", "i", "k", "j",
     (64, 64)),
]
FORMS = {"default": False, "pipelined": True}


def _spec(name: str, case: tuple, pipelined: bool):
    from kernelstitch.agents.coder.codegen import ContractionSpec, TensorArg

    _, equation, shapes, sides, batch, m, n, k, tile = case
    inputs = tuple(TensorArg(f"x{o}", "float32") for o in range(len(shapes)))
    return ContractionSpec(name, inputs, equation, sides, batch, m, n, k, "float32", tile, pipelined)


def build(torch):
    from kernelstitch.agents.coder.codegen import (
        EXTRA_CFLAGS,
        EXTRA_CUDA_CFLAGS,
        EXTRA_LDFLAGS,
        emit,
    )
    from kernelstitch.agents.coder.codegen.common import build_extension_sources
    from torch.utils.cpp_extension import load_inline

    kernels = [emit(_spec(f"ctr{k}_{form}", case, piped)) for k, case in enumerate(CASES)
               for form, piped in FORMS.items()]
    cpp, cuda, functions = build_extension_sources(kernels)
    return load_inline(name="ks_contraction_pipelined_timing", cpp_sources=[cpp], cuda_sources=[cuda],
                       functions=functions, extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


def measure(torch, ext, timer, runs: int, k: int) -> list[dict]:
    label, equation, shapes = CASES[k][:3]
    args = tuple(torch.randn(*s, device="cuda") for s in shapes)

    def reference(*a):
        return torch.einsum(equation, *a)

    want = reference(*args)

    def check(form, got):
        if not torch.allclose(got, want, rtol=1e-3, atol=1e-3):
            raise SystemExit(f"{form} differs from torch.einsum on {label}")

    row = {"case": label, "shapes": [list(s) for s in shapes]}
    variants = {form: getattr(ext, f"ctr{k}_{form}") for form in FORMS} | {"torch": reference}
    nbytes = (sum(a.numel() for a in args) + want.numel()) * 4
    row.update(timed_variants(timer, variants, check, nbytes, runs, *args))
    return [row]


def main() -> int:
    return run_cases(__doc__, build, measure, len(CASES))


if __name__ == "__main__":
    sys.exit(main())
