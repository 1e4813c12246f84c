"""Compare one call's outputs with the reference's (on the GPU, in the judge; CPU works too).

Returns failures as (code, message, detail) in the order a user should read them: structure,
shape, dtype, device, layout, unwritten memory, NaN/Inf, values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from kernelstitch.agents.verifier.poison import POISON_BYTE
from kernelstitch.agents.verifier.tolerances import EXACT_FACTOR, tolerance_for


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
        return torch.zeros(tensor.shape, dtype=torch.bool, device=tensor.device)
    flat = tensor.contiguous()
    signed = _SIGNED_OF_WIDTH.get(tensor.element_size())
    if signed is None or tensor.is_complex():
        raw = flat.view(torch.uint8).reshape(tensor.numel(), tensor.element_size())
        return (raw == POISON_BYTE).all(dim=1).reshape(tensor.shape)
    return flat.view(signed) == -1


# Outputs are judged in slices of this many elements.  On the CPU a slice's temporaries stay in
# cache and are reused, where whole-tensor temporaries of a 512 MiB output cost a page fault per
# 4 KiB (measured: 8.8 s for a 128M-element fp32 output on 2 cores, whole-tensor).  On the GPU
# the slices bound the comparison's temporaries (a few times 128 MiB) beside multi-GB outputs.
CHUNK_ELEMENTS = 1 << 20
GPU_CHUNK_ELEMENTS = 1 << 25


@dataclass(frozen=True)
class HostLeaf:
    """A candidate output tensor the judge cannot map (not on the checked GPU): what it was."""

    device: str
    shape: list[int]
    dtype: torch.dtype


def _slices(ref: torch.Tensor, cand: torch.Tensor):
    """(offset, ref slice, cand slice) over two flat tensors of the same length."""
    step = GPU_CHUNK_ELEMENTS if ref.is_cuda else CHUNK_ELEMENTS
    for start in range(0, ref.numel(), max(step, 1)):
        yield start, ref[start:start + step], cand[start:start + step]


def _unwritten(ref: torch.Tensor, cand: torch.Tensor) -> tuple[int, int | None]:
    """How many candidate elements (flat tensors) still hold the poison pattern where the
    reference does not, and the flat index of the first one."""
    count, first = 0, None
    for start, r, c in _slices(ref, cand):
        mask = _poisoned_mask(c) & ~_poisoned_mask(r)
        found = int(mask.sum())
        if found and first is None:
            first = start + int(mask.nonzero()[0].item())
        count += found
    return count, first


def compare_tensor(index: int, ref: torch.Tensor, cand: torch.Tensor,
                   meta: OutputMeta | None, cand_device: str, expected_device: str,
                   cand_contiguous: bool, cand_strides: tuple[int, ...],
                   precision: str = "fp32") -> list[Failure]:
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
    # Flattened once in logical (row-major) order: every pass below walks the same slices, and
    # a non-contiguous output is copied once, not once per pass.
    ref, cand = ref.reshape(-1), cand.reshape(-1)
    count, first = _unwritten(ref, cand)
    if count:
        failures.append(Failure(
            "unwritten_output",
            f"{where}: {count} of {cand.numel()} elements were never written (they still hold "
            f"the poison pattern; first at flat index {first})",
            {"unwritten": count, "numel": cand.numel(), "first_index": first}))
        return failures
    failures += _compare_values(where, ref, cand, precision)
    return failures


@dataclass
class _FirstPass:
    """What the tolerance pass needs from the whole tensor: non-finite facts and the RMS."""

    bad_nonfinite: int = 0  # NaN/Inf in the candidate where the reference is finite
    special: int = 0  # NaN/Inf in the reference
    special_mismatched: int = 0  # of those, positions where the candidate differs
    square_sum: float = 0.0  # over the reference's finite values


def _work_dtype(ref: torch.Tensor) -> torch.dtype:
    # fp32 arithmetic is exact enough to judge 1e-4 tolerances and halves the memory traffic
    # of double; float64 outputs are judged in float64.
    return (torch.complex128 if ref.is_complex()
            else torch.float64 if ref.dtype == torch.float64 else torch.float32)


def _first_pass(ref: torch.Tensor, cand: torch.Tensor, work: torch.dtype) -> _FirstPass:
    facts = _FirstPass()
    for _, rs, cs in _slices(ref, cand):
        r, c = rs.to(work), cs.to(work)
        ref_finite = torch.isfinite(r)
        facts.bad_nonfinite += int((ref_finite & ~torch.isfinite(c)).sum())
        special = ~ref_finite
        special_count = int(special.sum())
        facts.special += special_count
        if special_count:
            facts.special_mismatched += _differing_specials(r, c, special)
            magnitude = torch.where(ref_finite, r.abs(), 0)
        else:
            magnitude = r.abs()
        facts.square_sum += float(magnitude.square_().sum(dtype=torch.float64))
    return facts


def _outside_tolerance(ref: torch.Tensor, cand: torch.Tensor, work: torch.dtype,
                       rtol: float, atol_abs: float, any_special: bool) -> tuple[int, float]:
    """Elements with |c - r| > rtol*|r| + atol_abs (finite reference positions only), and the
    largest |c - r| over the finite reference positions."""
    count, worst = 0, 0.0
    for _, rs, cs in _slices(ref, cand):
        r, c = rs.to(work), cs.to(work)
        diff = (c - r).abs()
        allowed = r.abs().mul_(rtol).add_(atol_abs)
        bad = diff > allowed
        if any_special:
            ref_finite = torch.isfinite(r)
            bad &= ref_finite
            diff = torch.where(ref_finite, diff, torch.zeros_like(diff))
        count += int(bad.sum())
        if diff.numel():
            worst = max(worst, float(diff.max()))
    return count, worst


def _compare_values(where: str, ref: torch.Tensor, cand: torch.Tensor,
                    precision: str = "fp32") -> list[Failure]:
    if not (ref.is_floating_point() or ref.is_complex()):
        mismatched = sum(int((r != c).sum()) for _, r, c in _slices(ref, cand))
        if mismatched:
            return [Failure("wrong_output", f"{where}: {mismatched} of {ref.numel()} elements "
                            "differ (exact match required for this dtype)",
                            {"mismatched": mismatched})]
        return []
    work = _work_dtype(ref)
    facts = _first_pass(ref, cand, work)
    if facts.bad_nonfinite:
        return [Failure("nan_or_inf", f"{where}: {facts.bad_nonfinite} elements are NaN/Inf "
                        "where the reference is finite", {"count": facts.bad_nonfinite})]
    if facts.special_mismatched:  # wrong_output: the float64 second opinion may overturn it
        # (fp32 overflowed where the candidate is finite and right), but only where float64 has no
        # NaN / Inf there either (compare_with_exact)
        return [Failure("wrong_output", f"{where}: {facts.special_mismatched} elements differ from "
                        "the reference's NaN/Inf there", {"count": facts.special_mismatched})]
    tol = tolerance_for(str(ref.dtype), precision)
    finite_count = ref.numel() - facts.special
    scale = (facts.square_sum / finite_count) ** 0.5 if finite_count else 1.0
    scale = scale if scale > 0 else 1.0
    count, worst = _outside_tolerance(ref, cand, work, tol.rtol, tol.atol * scale,
                                      facts.special > 0)
    if count:
        return [Failure(
            "wrong_output",
            f"{where}: {count} of {ref.numel()} elements outside tolerance (max abs error "
            f"{worst:.3g}, reference RMS {scale:.3g}, rtol {tol.rtol:g}, atol {tol.atol:g}*RMS)",
            {"mismatched": count, "max_abs_error": worst, "scale": scale,
             "rtol": tol.rtol, "atol": tol.atol, "precision": precision})]
    return []


def compare_outputs(ref_leaves: list[Any], cand_leaves: list[Any], metas: list[Any],
                    cand_info: list[dict[str, Any]], expected_device: str,
                    precision: str = "fp32") -> list[Failure]:
    """`cand_info` holds each candidate leaf's facts as the candidate's process saw them;
    `precision` the user's opt-in, whose bound floating outputs get (tolerances.py)."""
    if len(ref_leaves) != len(cand_leaves):
        return [Failure("shape_mismatch", f"forward returned {len(cand_leaves)} values, the "
                        f"reference returns {len(ref_leaves)}")]
    failures: list[Failure] = []
    for index, (ref, cand) in enumerate(zip(ref_leaves, cand_leaves)):
        if isinstance(ref, torch.Tensor) and isinstance(cand, HostLeaf):
            failures += _host_leaf_failures(index, ref, cand, expected_device)
            continue
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
                                   info["contiguous"], tuple(info["strides"]), precision)
    return failures


def _host_leaf_failures(index: int, ref: torch.Tensor, cand: HostLeaf,
                        expected_device: str) -> list[Failure]:
    where = f"output {index}"
    if list(cand.shape) != list(ref.shape):
        return [Failure("shape_mismatch", f"{where} has shape {list(cand.shape)}, expected "
                        f"{list(ref.shape)}", {"got": list(cand.shape),
                                               "expected": list(ref.shape)})]
    if cand.dtype != ref.dtype:
        return [Failure("dtype_mismatch", f"{where} has dtype {cand.dtype}, expected {ref.dtype}",
                        {"got": str(cand.dtype), "expected": str(ref.dtype)})]
    return [Failure("device_mismatch", f"{where} is on {cand.device}, expected "
                    f"{expected_device} (its values were not compared)")]


def compare_with_exact(ref_leaves: list[Any], cand_leaves: list[Any],
                       exact_leaves: list[Any], factor: float = EXACT_FACTOR,
                       ) -> tuple[list[Failure], list[dict[str, Any]]]:
    """Second opinion for `wrong_output` failures (tolerances.py, cancellation): each floating
    output against a float64 recomputation of the reference.  Passes when the candidate's
    largest error from it is within EXACT_FACTOR x the reference's own, or within the usual
    bound taken around the float64 values.  Returns (failures, per-output errors)."""
    failures: list[Failure] = []
    errors: list[dict[str, Any]] = []
    for index, (ref, cand, exact) in enumerate(zip(ref_leaves, cand_leaves, exact_leaves)):
        if not (isinstance(ref, torch.Tensor) and ref.is_floating_point()):
            # integer, bool and plain outputs have no second opinion: their first-pass failure
            # stands (it was dropped here once, accepting a wrong integer output)
            if isinstance(ref, torch.Tensor) and isinstance(cand, torch.Tensor):
                failures += _compare_values(f"output {index}", ref.reshape(-1), cand.reshape(-1))
            elif not isinstance(ref, torch.Tensor) and ref != cand:
                failures.append(Failure("wrong_output", f"output {index}: {cand!r} != {ref!r}"))
            continue
        exact64 = exact.to(device=cand.device, dtype=torch.float64).reshape(-1)
        # NaN / Inf in the float64 result (in the output's dtype) must be the candidate's too:
        # the error measures below skip those positions, and once accepted uniform weights on a
        # fully masked softmax row, where PyTorch and float64 give NaN (an H100 run, 2026-11-27)
        mismatched = _special_mismatches(exact64.to(ref.dtype), cand.reshape(-1))
        if mismatched:
            failures.append(Failure(
                "nan_or_inf", f"output {index}: {mismatched} elements differ from the NaN/Inf of a "
                "float64 recomputation of the reference there", {"count": mismatched}))
            continue
        ref_err = _max_error(ref.reshape(-1), exact64)
        cand_err = _max_error(cand.reshape(-1), exact64)
        errors.append({"output": index, "reference_error": ref_err, "candidate_error": cand_err})
        if cand_err <= factor * ref_err:
            continue
        if not _compare_values(f"output {index}", exact64.to(ref.dtype), cand.reshape(-1)):
            continue
        failures.append(Failure(
            "wrong_output",
            f"output {index}: max error {cand_err:.3g} from a float64 recomputation of the "
            f"reference, more than {factor:g}x PyTorch's own ({ref_err:.3g})",
            {"candidate_error": cand_err, "reference_error": ref_err, "factor": factor}))
    return failures, errors


def _differing_specials(expected: torch.Tensor, cand: torch.Tensor, special: torch.Tensor) -> int:
    """Of the `special` (NaN / +-Inf) positions of `expected`, those where `cand` is not the same."""
    same = (torch.isnan(expected) & torch.isnan(cand)) | (expected == cand)
    return int((special & ~same).sum())


def _special_mismatches(expected: torch.Tensor, cand: torch.Tensor) -> int:
    """Positions where `expected` is NaN or +-Inf and `cand` is not the same value."""
    count = 0
    for _, e, c in _slices(expected, cand):
        special = ~torch.isfinite(e)
        if bool(special.any()):
            count += _differing_specials(e, c, special)
    return count


def _max_error(values: torch.Tensor, exact64: torch.Tensor) -> float:
    """max |values - exact| over finite exact positions (NaN where values are not finite)."""
    worst = 0.0
    for _, e, v in _slices(exact64, values):
        diff = torch.where(torch.isfinite(e), (v.to(torch.float64) - e).abs(), torch.zeros_like(e))
        if not bool(torch.isfinite(diff).all()):
            return float("nan")
        if diff.numel():
            worst = max(worst, float(diff.max()))
    return worst


def precision_errors(exact_leaves: list[Any], cand_leaves: list[Any],
                     fp32_leaves: list[Any]) -> list[dict[str, Any]]:
    """Per floating output: the largest error of the candidate and of PyTorch's fp32 result
    from the float64 recomputation, absolute and relative to its RMS (what a reduced precision
    costs on this module, reported however the comparison ends)."""
    errors = []
    for index, (exact, cand, fp32) in enumerate(zip(exact_leaves, cand_leaves, fp32_leaves)):
        if not (isinstance(exact, torch.Tensor) and exact.is_floating_point()
                and isinstance(cand, torch.Tensor) and cand.shape == exact.shape):
            continue
        exact64 = exact.to(device=cand.device, dtype=torch.float64).reshape(-1)
        # measured where the float64 result is finite in the output's dtype too (a value past
        # fp32's range is inf in any fp32 program, correct or not)
        representable = torch.isfinite(exact64.to(cand.dtype))
        exact64 = torch.where(representable, exact64, torch.full_like(exact64, float("nan")))
        finite = exact64[representable]
        rms = float(finite.square().mean().sqrt()) if finite.numel() else 0.0
        rms = rms if rms > 0 else 1.0
        cand_err = _max_error(cand.reshape(-1), exact64)
        fp32_err = (_max_error(fp32.reshape(-1), exact64)
                    if isinstance(fp32, torch.Tensor) and fp32.shape == exact.shape else None)
        errors.append({"output": index, "max_abs_error": cand_err, "rms": rms,
                       "max_rel_error": cand_err / rms,
                       "fp32_max_abs_error": fp32_err,
                       "fp32_max_rel_error": None if fp32_err is None else fp32_err / rms})
    return errors
