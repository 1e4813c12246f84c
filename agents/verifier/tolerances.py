"""Output tolerances by dtype (torch-free table; compare.py applies it).

An element passes when   |candidate - reference| <= atol * scale + rtol * |reference|
where `scale` is the root-mean-square of the reference output (1.0 when that is 0), so the
absolute part follows the magnitude of the problem's values instead of a fixed 1e-5 that is
meaningless for values around 1e4 and lax for values around 1e-6.

* float32: rtol 1e-4, atol 1e-4 (tight: a candidate computing in fp16/bf16/tf32 fails).  The
  reference is computed with TF32 disabled so this compares against true fp32.  atol was 1e-5
  until an H100 run of examples/mlp.py (an fp32 K = 16384 GEMM, cuBLASLt vs PyTorch's cuBLAS
  on a 1025-row batch) put 2 of 4.2M honest outputs at 3.5e-5 x RMS from the reference:
  accumulation-order noise, which 1e-4 covers with room while TF32 (~3e-4 x RMS typical) still
  fails on most elements (tests/test_tolerances.py).
* float16: rtol 1e-2, atol 1e-2 (about 10 ulp of fp16; fused kernels accumulate in fp32 and
  differ from PyTorch's op-by-op rounding).
* bfloat16: rtol 2e-2, atol 2e-2 (bf16 has 3 fewer mantissa bits than fp16).
* float64: rtol 1e-7, atol 1e-9.
* integer and bool outputs: exact.

Reduced precision (the user's opt-in, kernelstitch/core/precision.py): the candidate is compared
with a float64 recomputation of the reference on the same inputs (the fp32 reference where the
model cannot run in float64), and float32 outputs get the precision's bound instead of fp32's;
outputs of other dtypes keep theirs (the looser of the two applies).  The bounds are about 20x
the unit roundoff of the products' format (2^-11 for TF32 and fp16 mantissas, 2^-8 for bf16), as
errors of long dot products grow with sqrt(K) and through layers; KernelBench itself checks at
1e-2:

| precision | float32 outputs: rtol | atol (x RMS) |
|-----------|-----------------------|--------------|
| fp32      | 1e-4                  | 1e-4         |
| tf32      | 1e-2                  | 1e-2         |
| fp16      | 1e-2                  | 1e-2         |
| bf16      | 5e-2                  | 5e-2         |

Cancellation (outputs whose true value is about 0, e.g. the mean of a normalised tensor): the
reference's RMS is then rounding noise itself and any other summation order fails the bound.
When only `wrong_output` failures of floating outputs remain, the judge recomputes the case in
float64 and accepts a candidate whose largest error from that float64 result is within
`EXACT_FACTOR` times PyTorch's own (the reference's largest error from it), or within the bound
above measured against the float64 result: as accurate as PyTorch is.  The candidate cannot
influence either reference.  Not for a model that draws random numbers (training-mode dropout:
rerun from the random state the reference drew from it gives the same result, from a later one
another): its float64 recomputation draws other numbers, and measured from it the reference is
as far off as any garbage, so the first comparison stands.

Under a reduced precision the same second opinion (outputs that fail the bound, e.g. near zero
by cancellation, where the float64 RMS is tiny) accepts a candidate at most
`REDUCED_EXACT_FACTOR` (2x) less accurate than PyTorch run with the precision allowed (the
baselines' TF32 or autocast) on the same inputs, both measured from the float64 result.

NaN/Inf: where the reference is finite the candidate must be finite (never tolerated); where the
reference is NaN or +-Inf the candidate must have the same non-finite value at that position,
unless the float64 second opinion finds a finite value there (fp32 overflowed) that the candidate
matches within the rules above.  A candidate must always reproduce the float64 result's own NaN /
Inf (a fully masked softmax row is NaN in both).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float  # multiplied by the reference's RMS


EXACT_FACTOR = 8.0  # a candidate may be this many times less accurate than PyTorch's fp32 result
# Under a reduced precision the second opinion compares with PyTorch run with that precision
# allowed (TF32, autocast), whose own error is already the precision's: a small factor only.
REDUCED_EXACT_FACTOR = 2.0

TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(rtol=1e-4, atol=1e-4),
    "float16": Tolerance(rtol=1e-2, atol=1e-2),
    "bfloat16": Tolerance(rtol=2e-2, atol=2e-2),
    "float64": Tolerance(rtol=1e-7, atol=1e-9),
}
EXACT = Tolerance(rtol=0.0, atol=0.0)
# float32 outputs under a reduced precision (the table above)
PRECISION_TOLERANCES: dict[str, Tolerance] = {
    "fp32": TOLERANCES["float32"],
    "tf32": Tolerance(rtol=1e-2, atol=1e-2),
    "fp16": Tolerance(rtol=1e-2, atol=1e-2),
    "bf16": Tolerance(rtol=5e-2, atol=5e-2),
}


def tolerance_for(dtype_name: str, precision: str = "fp32") -> Tolerance:
    """`dtype_name` as str(torch.dtype) without the prefix, e.g. "float32"; `precision` the
    user's opt-in (the looser of the dtype's and the precision's bound for floating outputs)."""
    own = TOLERANCES.get(dtype_name.removeprefix("torch."), EXACT)
    allowed = PRECISION_TOLERANCES.get(precision, PRECISION_TOLERANCES["fp32"])
    if own is EXACT or dtype_name.removeprefix("torch.") == "float64":
        return own
    return Tolerance(rtol=max(own.rtol, allowed.rtol), atol=max(own.atol, allowed.atol))
