"""Negative log-likelihood emitter: cross_entropy's loss from its rows' logsumexp (a reduction
kernel before it) and the logit at each target, so the [N, C] log-probabilities torch writes
are never stored (cuda/nll/).  Reduction none: a thread per row; mean / sum: one block in a
fixed order (the same result every run), the mean over the rows whose target is not ignored."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import CUDA_TYPE, TORCH_DTYPE, check_identifier
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import NllLossSpec

REDUCTIONS = ("none", "mean", "sum")


def emit_nll(spec: NllLossSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.reduction not in REDUCTIONS:
        raise ValueError(f"{name}: unknown reduction {spec.reduction!r}")
    if spec.target.dtype != "int64":
        raise ValueError(f"{name}: targets must be int64, got {spec.target.dtype}")
    launcher_sig = (f"void {name}_launch(const void* x, int64_t sx0, int64_t sx1, const void* lse, const void* t, "
                    "void* out, int64_t N, int64_t C, cudaStream_t stream)")
    flag = lambda on: "true" if on else "false"  # noqa: E731
    cuda = render(
        "nll/kernel.cu", name=name, reduction=spec.reduction, x_t=CUDA_TYPE[spec.logits.dtype],
        lse_t=CUDA_TYPE[spec.lse.dtype], out_t=CUDA_TYPE[spec.out_dtype], ignore_index=int(spec.ignore_index),
        mean=flag(spec.reduction == "mean"), sum=flag(spec.reduction == "sum"), launcher_sig=launcher_sig)
    binding = render(
        "nll/binding.cpp", name=name, reduction=spec.reduction, x_name=spec.logits.name,
        t_name=spec.target.name, lse_name=spec.lse.name, x_dtype=TORCH_DTYPE[spec.logits.dtype],
        lse_dtype=TORCH_DTYPE[spec.lse.dtype], out_dtype=TORCH_DTYPE[spec.out_dtype],
        out_shape="std::vector<int64_t>{N}" if spec.reduction == "none" else "std::vector<int64_t>{}")
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=(spec.logits.name, spec.target.name, spec.lse.name),
        notes=(f"cross_entropy's negative log-likelihood (reduction {spec.reduction}): lse_i - x[i, t_i], "
               "the [N, C] log-probabilities never stored",
               "a thread per row (none) or one block in a fixed order (mean / sum)"),
    )
