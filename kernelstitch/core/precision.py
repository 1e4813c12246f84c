"""The precision a user allows for a module (issue 24): names and what each one changes.

Torch-free (the CLI, the server and the planner read it).  Every program is checked in strict
fp32 (TF32 off) against the fp32 reference unless a reduced precision is allowed, and timed under
the settings the user runs it with:

| precision | GEMMs (cuBLASLt, ours)      | PyTorch matmuls / convs left as library calls | programs and baselines timed under |
|-----------|-----------------------------|-----------------------------------------------|------------------------------------|
| fp32      | fp32 (or 3xTF32: fp32's     | as the user's settings say: PyTorch's default | PyTorch's defaults                 |
| (default) | accuracy, a measured choice)| is TF32 for cuDNN convs / RNNs, fp32 matmuls  |                                    |
| strict    | fp32 (or 3xTF32)            | fp32: the user turned TF32 off everywhere     | TF32 off (cuBLAS and cuDNN)        |
| tf32      | TF32 tensor cores           | TF32 (allow_tf32 for cuBLAS and cuDNN)        | same, TF32 on                      |
| bf16      | bf16 tensor cores, fp32 I/O | TF32 (PyTorch has no bf16 / fp16 math for     | under autocast (bfloat16)          |
|           | (COMPUTE_32F_FAST_16BF)     | fp32 tensors short of casting them)           |                                    |
| fp16      | fp16 tensor cores, fp32 I/O | TF32                                          | under autocast (float16)           |
|           | (COMPUTE_32F_FAST_16F)      |                                               |                                    |

`strict` is for users whose process sets `torch.backends.cudnn.allow_tf32 = False` (and keeps
matmuls in fp32): their convolutions are slow fp32 cuDNN kernels, which the planner's `conv3xtf32`
variant (transposed convolutions on the TF32 tensor cores at fp32's accuracy) can beat; under
PyTorch's defaults the original's convolutions already run in TF32 and it cannot.

Only torch's legacy flags are touched (`allow_tf32` of cuBLAS and cuDNN, what the Verifier's
strict fp32 sets): torch refuses to read its matmul precision once they are mixed with
`set_float32_matmul_precision`.

The Verifier's tolerance per precision is agents/verifier/tolerances.py's table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Precision = Literal["fp32", "strict", "tf32", "bf16", "fp16"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "strict", "tf32", "bf16", "fp16")
# The precisions that keep fp32's accuracy (the fp32 reference, fp32's bound); they differ only
# in the settings programs are timed under.
FULL_PRECISIONS: tuple[Precision, ...] = ("fp32", "strict")
DEFAULT_PRECISION: Precision = "fp32"


@dataclass(frozen=True)
class PrecisionMode:
    name: Precision
    gemm: str  # what our cuBLASLt GEMMs compute in (the plan and the report say it)
    library: str  # what PyTorch's matmuls and convolutions left in the program compute in
    baseline: str  # how the eager and torch.compile baselines are allowed the same precision
    # torch settings the generated forward holds while it runs (restored after it)
    allow_tf32: bool
    autocast_dtype: str | None  # the baselines' torch.autocast dtype (None: flags only)

    @property
    def reduced(self) -> bool:
        return self.name not in FULL_PRECISIONS

    @property
    def timed_tf32_off(self) -> bool:
        """Whether programs are timed with TF32 off, the settings they are checked under (the
        user's code turns it off: `strict`); otherwise under PyTorch's defaults."""
        return self.name == "strict"

    def summary(self) -> str:
        return f"{self.name}: GEMMs {self.gemm}; PyTorch matmuls and convolutions {self.library}"


MODES: dict[str, PrecisionMode] = {
    "fp32": PrecisionMode("fp32", "fp32", "as the user's settings say (PyTorch's default: "
                          "convolutions and RNNs in TF32, matmuls in fp32)", "PyTorch's defaults",
                          False, None),
    "strict": PrecisionMode("strict", "fp32", "fp32 (TF32 off, as the user's process has it)",
                            "TF32 off for cuBLAS and cuDNN", False, None),
    "tf32": PrecisionMode("tf32", "TF32 tensor cores", "TF32",
                          "torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 "
                          "= True", True, None),
    "bf16": PrecisionMode("bf16", "bf16 tensor cores with fp32 inputs and outputs", "TF32",
                          "torch.autocast(bfloat16)", True, "bfloat16"),
    "fp16": PrecisionMode("fp16", "fp16 tensor cores with fp32 inputs and outputs", "TF32",
                          "torch.autocast(float16)", True, "float16"),
}


def timing_settings_label(precision: str) -> str:
    """The settings programs generated for `precision` are timed under, in words (bench reports)."""
    mode = precision_mode(precision)
    if mode.timed_tf32_off:
        return "TF32 off for cuBLAS and cuDNN"
    if mode.reduced:
        return f"{mode.name} allowed to the baselines ({mode.baseline}), PyTorch's defaults otherwise"
    return "PyTorch's defaults (cuDNN convolutions and RNNs in TF32, matmuls in fp32)"


def timed_with(precision: str) -> str:
    """What the baselines' labels add for `precision`: nothing under PyTorch's defaults."""
    mode = precision_mode(precision)
    if mode.timed_tf32_off:
        return " (TF32 off)"
    return f" ({mode.name} allowed)" if mode.reduced else ""


class PrecisionError(ValueError):
    """A precision name that is not one of PRECISIONS."""


def precision_mode(name: str | None) -> PrecisionMode:
    """The mode of `name` (None: the default); PrecisionError names the choices otherwise."""
    key = (name or DEFAULT_PRECISION).strip().lower()
    if key not in MODES:
        raise PrecisionError(f"precision {name!r} is not one of {', '.join(PRECISIONS)}")
    return MODES[key]


# How far PyTorch fp32's own result may be from the float64 recomputation, as a share of the
# precision's bound (atol x RMS), for that recomputation to stand for the module.  Beyond it the
# float64 run is another computation (random draws: training-mode dropout draws another mask in
# float64; an H100 bf16 run put PyTorch fp32 and the candidate both at 5.4 x RMS) or too
# ill-conditioned to judge by: the judge then compares with the fp32 reference, which drew what
# the candidate drew, at the bound, and the reports do not quote a float64 error.  A share of the
# bound, not a fixed level: with random draws moving outputs by e between the bound and a fixed
# level, the second opinion (2x the error of PyTorch with the precision, itself ~e from float64)
# would accept anything within 2e (the change's review).  Honest fp32 sits at 1e-7..1e-4 x RMS.
FLOAT64_SHARE_OF_BOUND = 0.25


def float64_describes(fp32_max_rel_error: float | None, bound_atol: float) -> bool:
    """Whether a float64 recomputation stands for the module under a precision whose bound is
    `bound_atol` x RMS (see FLOAT64_SHARE_OF_BOUND); True when PyTorch fp32's error is unknown."""
    return fp32_max_rel_error is None or not fp32_max_rel_error > FLOAT64_SHARE_OF_BOUND * bound_atol
