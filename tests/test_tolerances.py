"""The fp32 tolerance separates honest re-orderings of a long reduction from TF32 arithmetic
(agents/verifier/tolerances.py), checked on the CPU with a K = 16384 matmul: summing in another
order moves outputs by ~1e-6 of their RMS, TF32 inputs by ~2e-4.  Outputs near zero by
cancellation get a second opinion against a float64 recomputation (compare_with_exact)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.compare import _compare_values, compare_tensor, compare_with_exact  # noqa: E402


def _passes(candidate: torch.Tensor, reference: torch.Tensor) -> bool:
    """The Verifier's own value comparison (dtype tolerance, RMS-scaled atol)."""
    return _compare_values("output 0", reference, candidate) == []


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """Round fp32 to TF32's 10-bit mantissa (round to nearest)."""
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF
    return rounded.view(torch.float32)


def test_fp32_tolerance_accepts_reordered_sums_and_rejects_tf32():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(64, 16384, generator=gen)
    w = torch.randn(16384, 256, generator=gen)
    reference = (x.double() @ w.double()).float()
    split_k = sum((x[:, k:k + 1024] @ w[k:k + 1024]) for k in range(0, 16384, 1024))  # another order
    plain = x @ w
    assert not torch.equal(split_k, plain)  # the orders really differ
    assert _passes(plain, reference) and _passes(split_k, reference)
    assert not _passes(_tf32(x) @ _tf32(w), reference)


def test_fp32_tolerance_covers_the_accumulation_noise_seen_on_an_h100():
    """examples/mlp.py on an H100 (2026-11-23): cuBLASLt and PyTorch's fp32 GEMM (K = 16384)
    differed by up to 3.5e-5 x RMS on a few near-zero outputs; that must pass."""
    gen = torch.Generator().manual_seed(1)
    reference = torch.randn(1025, 4096, generator=gen) * 0.198
    rms = reference.pow(2).mean().sqrt()
    candidate = reference.clone()
    flat = candidate.view(-1)
    idx = torch.randint(0, flat.numel(), (64,), generator=gen)
    flat[idx] = flat[idx] * 0 + 3.5e-5 * rms  # near-zero outputs off by the observed error
    reference.view(-1)[idx] = 0.0
    assert _passes(candidate, reference)
    assert not _passes(reference + 3e-3 * rms, reference)  # far beyond it still fails


def _mean_of_normalised(seed: int, dtype=torch.float32) -> torch.Tensor:
    """Per-row means of rows normalised to mean 0: about 0 by cancellation (level2/23's output)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(128, 4096, generator=g, dtype=torch.float64)
    x = (x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True)
    return x.to(dtype)


def test_cancellation_fails_the_rms_bound_but_passes_against_float64():
    x32 = _mean_of_normalised(0)
    exact = x32.double().mean(1)  # the truth, up to float64 rounding
    reference = x32.mean(1)  # PyTorch's fp32 result: rounding noise around 0
    other_order = x32.flip(1).sum(1) / 4096  # an honest candidate, another summation order
    assert compare_tensor(0, reference, other_order, None, "cpu", "cpu", True, (1,))  # fp32 bound
    failures, errors = compare_with_exact([reference], [other_order], [exact])
    assert failures == [] and errors[0]["candidate_error"] <= 8 * errors[0]["reference_error"]


def test_float64_second_opinion_still_rejects_wrong_and_non_finite_values():
    x32 = _mean_of_normalised(1)
    exact, reference = x32.double().mean(1), x32.mean(1)
    wrong = reference + 1e-4  # far beyond PyTorch's own ~1e-8 error
    [failure], _ = compare_with_exact([reference], [wrong], [exact])
    assert failure.code == "wrong_output" and "float64" in failure.message
    broken = reference.clone()
    broken[3] = float("nan")
    [failure], _ = compare_with_exact([reference], [broken], [exact])
    assert failure.code in ("wrong_output", "nan_or_inf")
    # ordinary magnitudes: the usual bound around the float64 values decides
    values = torch.randn(1000, dtype=torch.float64)
    [failure], _ = compare_with_exact([values.float()], [(values * 1.001).float()], [values])
    assert failure.code == "wrong_output"
    assert compare_with_exact([values.float()], [values.float()], [values])[0] == []
