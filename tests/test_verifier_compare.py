"""The Verifier's output comparison on CPU tensors: unwritten (poisoned) elements, NaN/Inf
rules and tolerances, for every dtype width the poison check reads."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.compare import compare_tensor


def _codes(ref, cand):
    return [f.code for f in compare_tensor(0, ref, cand, None, "cuda:0", "cuda:0", True,
                                           tuple(cand.stride()))]


def _poison(t: torch.Tensor, index: int) -> torch.Tensor:
    out = t.clone()
    width = out.element_size()
    out.reshape(-1).view(torch.uint8)[index * width:(index + 1) * width] = 0xFF
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64,
                                   torch.int32, torch.int64, torch.int8])
def test_an_unwritten_element_is_found_in_every_width(dtype):
    gen = torch.Generator().manual_seed(0)
    ref = (torch.randn(64, 33, generator=gen) * 10).to(dtype)
    ref.view(-1)[100] = 5  # not the all-ones pattern (for int8 that is a legal value, -1)
    assert _codes(ref, ref.clone()) == []
    failures = compare_tensor(0, ref, _poison(ref, 100), None, "cuda:0", "cuda:0", True, (33, 1))
    assert [f.code for f in failures] == ["unwritten_output"]
    assert failures[0].detail["unwritten"] == 1 and failures[0].detail["first_index"] == 100


def test_nan_where_the_reference_is_finite_fails():
    ref = torch.randn(1000)
    cand = ref.clone()
    cand[7] = float("nan")
    assert _codes(ref, cand) == ["nan_or_inf"]


def test_non_finite_reference_values_must_be_matched_and_do_not_skew_the_scale():
    ref = torch.randn(1000)
    ref[3], ref[4] = float("inf"), float("nan")
    assert _codes(ref, ref.clone()) == []
    moved = ref.clone()
    moved[3] = 0.0
    assert _codes(ref, moved) == ["wrong_output"]  # a finite value where the reference is inf
    swapped = ref.clone()
    swapped[3] = float("-inf")
    assert _codes(ref, swapped) == ["wrong_output"]
    off = ref.clone()
    off[10] += 1e-2  # far outside fp32 tolerance of an RMS-1 output (inf/nan excluded)
    assert _codes(ref, off) == ["wrong_output"]


def test_integer_outputs_must_match_exactly():
    ref = torch.arange(100, dtype=torch.int64)
    cand = ref.clone()
    cand[5] += 1
    assert _codes(ref, cand) == ["wrong_output"]


def _failures(ref, cand):
    return [f.to_json() for f in compare_tensor(0, ref, cand, None, "cuda:0", "cuda:0", True,
                                                tuple(cand.stride()))]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_sliced_comparison_reports_what_one_whole_tensor_pass_reports(monkeypatch, dtype):
    """CPU outputs are judged slice by slice; the verdict and its numbers must not depend on
    where the slices fall (errors in a later slice, NaN/Inf in one slice skewing no scale)."""
    import kernelstitch.agents.verifier.compare as compare

    gen = torch.Generator().manual_seed(3)
    ref = (torch.randn(37, 101, generator=gen) * 4).to(dtype)
    cases = {"equal": ref.clone()}
    off = ref.clone()
    off.view(-1)[3000] += 1  # beyond the first slices
    off.view(-1)[17] += 1
    cases["off"] = off
    cases["unwritten"] = _poison(ref, 2900)
    if dtype.is_floating_point:
        special = ref.clone()
        special.view(-1)[1500] = float("inf")
        cases["inf_ref"] = special
        cases["nan_cand"] = ref.clone()
        cases["nan_cand"].view(-1)[3700] = float("nan")
    whole = {name: _failures(ref, cand) for name, cand in cases.items()}
    monkeypatch.setattr(compare, "CHUNK_ELEMENTS", 64)
    sliced = {name: _failures(ref, cand) for name, cand in cases.items()}
    assert sliced == whole
    assert whole["equal"] == [] and whole["off"][0]["detail"]["mismatched"] == 2
    assert whole["unwritten"][0]["detail"]["first_index"] == 2900
