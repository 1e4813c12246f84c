"""Compare one call's outputs with the reference's (CPU tensors, in the candidate worker).

Returns failures as (code, message, detail) in the order a user should read them: structure,
shape, dtype, device, layout, unwritten memory, NaN/Inf, values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from kernelstitch.agents.verifier.poison import POISON_BYTE
from kernelstitch.agents.verifier.tolerances import tolerance_for


@dataclass
class Failure:
    code: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "detail": self.detail}


@dataclass(frozen=True)
class OutputMeta:
    """What the reference's output looked like on the GPU (layout facts lost on CPU)."""

    is_contiguous: bool
    strides: tuple[int, ...]


def flatten_outputs(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten_outputs(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in flatten_outputs(value[key])]
    return [value]


# An all-0xFF element read as a signed integer of its width is -1: one comparison per element
# instead of a reduction over its bytes.
_SIGNED_OF_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
assert POISON_BYTE == 0xFF


def _poisoned_mask(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.numel() == 0 or tensor.dtype == torch.bool:
        return torch.zeros(tensor.shape, dtype=torch.bool)
    flat = tensor.contiguous()
    signed = _SIGNED_OF_WIDTH.get(tensor.element_size())
    if signed is None or tensor.is_complex():
        raw = flat.view(torch.uint8).reshape(tensor.numel(), tensor.element_size())
        return (raw == POISON_BYTE).all(dim=1).reshape(tensor.shape)
    return flat.view(signed) == -1


def compare_tensor(index: int, ref: torch.Tensor, cand: torch.Tensor,
                   meta: OutputMeta | None, cand_device: str, expected_device: str,
                   cand_contiguous: bool, cand_strides: tuple[int, ...]) -> list[Failure]:
    where = f"output {index}"
    if tuple(cand.shape) != tuple(ref.shape):
        return [Failure("shape_mismatch", f"{where} has shape {list(cand.shape)}, expected "
                        f"{list(ref.shape)}", {"got": list(cand.shape), "expected": list(ref.shape)})]
    if cand.dtype != ref.dtype:
        return [Failure("dtype_mismatch", f"{where} has dtype {cand.dtype}, expected {ref.dtype}",
                        {"got": str(cand.dtype), "expected": str(ref.dtype)})]
    failures = []
    if cand_device != expected_device:
        failures.append(Failure("device_mismatch", f"{where} is on {cand_device}, expected "
                                f"{expected_device}"))
    if meta is not None and meta.is_contiguous and not cand_contiguous:
        failures.append(Failure("not_contiguous", f"{where} is not contiguous (strides "
                                f"{list(cand_strides)}); the reference's output is"))
    unwritten = _poisoned_mask(cand) & ~_poisoned_mask(ref)
    count = int(unwritten.sum())
    if count:
        first = unwritten.reshape(-1).nonzero()[0].item()
        failures.append(Failure(
            "unwritten_output",
            f"{where}: {count} of {cand.numel()} elements were never written (they still hold "
            f"the poison pattern; first at flat index {first})",
            {"unwritten": count, "numel": cand.numel(), "first_index": first}))
        return failures
    failures += _compare_values(where, ref, cand)
    return failures


def _compare_values(where: str, ref: torch.Tensor, cand: torch.Tensor) -> list[Failure]:
    if not (ref.is_floating_point() or ref.is_complex()):
        mismatched = int((ref != cand).sum())
        if mismatched:
            return [Failure("wrong_output", f"{where}: {mismatched} of {ref.numel()} elements "
                            "differ (exact match required for this dtype)",
                            {"mismatched": mismatched})]
        return []
    # fp32 arithmetic is exact enough to judge 1e-4 tolerances and halves the memory traffic
    # of double on 1 GiB outputs; float64 outputs are judged in float64.
    work = (torch.complex128 if ref.is_complex()
            else torch.float64 if ref.dtype == torch.float64 else torch.float32)
    r = ref.to(work)
    c = cand.to(work)
    ref_finite = torch.isfinite(r)
    bad_nonfinite = ref_finite & ~torch.isfinite(c)
    if int(bad_nonfinite.sum()):
        count = int(bad_nonfinite.sum())
        return [Failure("nan_or_inf", f"{where}: {count} elements are NaN/Inf where the "
                        "reference is finite", {"count": count})]
    special = ~ref_finite
    special_count = int(special.sum())
    if special_count:
        same = (torch.isnan(r) & torch.isnan(c)) | (r == c)
        if int((special & ~same).sum()):
            return [Failure("wrong_output", f"{where}: NaN/Inf positions differ from the "
                            "reference")]
    tol = tolerance_for(str(ref.dtype))
    # Written for 1 GiB outputs: no boolean-mask copies when everything is finite (the usual
    # case), in-place arithmetic, one pass per step.
    all_finite = special_count == 0
    magnitude = r.abs() if all_finite else torch.where(ref_finite, r.abs(), 0)
    square_sum = float(magnitude.square().sum(dtype=torch.float64))
    finite_count = r.numel() - special_count
    scale = (square_sum / finite_count) ** 0.5 if finite_count else 1.0
    scale = scale if scale > 0 else 1.0
    diff = (c - r).abs()
    allowed = r.abs().mul_(tol.rtol).add_(tol.atol * scale)
    bad = diff > allowed
    if not all_finite:
        bad &= ref_finite
    count = int(bad.sum())
    if count:
        worst = float(torch.where(ref_finite, diff, torch.zeros_like(diff)).max())
        return [Failure(
            "wrong_output",
            f"{where}: {count} of {ref.numel()} elements outside tolerance (max abs error "
            f"{worst:.3g}, reference RMS {scale:.3g}, rtol {tol.rtol:g}, atol {tol.atol:g}*RMS)",
            {"mismatched": count, "max_abs_error": worst, "scale": scale,
             "rtol": tol.rtol, "atol": tol.atol})]
    return []


def compare_outputs(ref_leaves: list[Any], cand_leaves: list[Any], metas: list[Any],
                    cand_info: list[dict[str, Any]], expected_device: str) -> list[Failure]:
    """`cand_leaves` are CPU copies; `cand_info` holds each leaf's GPU-side facts."""
    if len(ref_leaves) != len(cand_leaves):
        return [Failure("shape_mismatch", f"forward returned {len(cand_leaves)} values, the "
                        f"reference returns {len(ref_leaves)}")]
    failures: list[Failure] = []
    for index, (ref, cand) in enumerate(zip(ref_leaves, cand_leaves)):
        if isinstance(ref, torch.Tensor) != isinstance(cand, torch.Tensor):
            failures.append(Failure("shape_mismatch", f"output {index}: expected "
                                    f"{type(ref).__name__}, got {type(cand).__name__}"))
            continue
        if not isinstance(ref, torch.Tensor):
            if ref != cand:
                failures.append(Failure("wrong_output", f"output {index}: {cand!r} != {ref!r}"))
            continue
        info = cand_info[index]
        meta = metas[index] if index < len(metas) else None
        failures += compare_tensor(index, ref, cand, meta, info["device"], expected_device,
                                   info["contiguous"], tuple(info["strides"]))
    return failures
