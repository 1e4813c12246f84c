"""The Verifier's stress cases for softmax and attention (issue 23): which problems get them,
and the inputs they make (CPU; tests/test_stress_cases_gpu.py judges kernels with them)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.inputs import (
    LARGE_INPUT_SCALE,
    MASKED_ROW_PERIOD,
    case_inputs,
    long_sequence_length,
    long_sequence_shapes,
    shape_variants,
)
from kernelstitch.agents.verifier.reference_task import _case_list
from kernelstitch.agents.verifier.stress_cases import plan_stress

CPU = torch.device("cpu")


def test_softmax_problems_get_large_logits_and_attention_also_long_sequences():
    plan = plan_stress(["linear", "softmax"], reduced_precision=False, has_bool_mask=False)
    assert plan.transforms() == ["large_logits"] and not plan.long_sequence
    plan = plan_stress(["scaled_dot_product_attention", "_scaled_dot_product_flash_attention"],
                       reduced_precision=False, has_bool_mask=True)
    assert plan.transforms() == ["large_logits", "masked_rows"] and plan.long_sequence
    for fused in ("_native_multi_head_attention", "_transformer_encoder_layer_fwd"):
        assert plan_stress([fused], reduced_precision=False, has_bool_mask=False).long_sequence
    written_out = plan_stress(["bmm", "mul", "softmax", "masked_fill"], reduced_precision=False,
                              has_bool_mask=False)
    assert written_out.long_sequence and written_out.large_logits


def test_no_stress_case_without_softmax_and_no_large_logits_where_it_cannot_be_judged():
    assert plan_stress(["conv2d", "relu", "bmm"], reduced_precision=False,
                       has_bool_mask=True).transforms() == []
    bce = plan_stress(["softmax", "binary_cross_entropy"], reduced_precision=False,
                      has_bool_mask=False)
    assert not bce.large_logits and "binary_cross_entropy checks its inputs' range" in bce.reason
    tf32 = plan_stress(["softmax"], reduced_precision=True, has_bool_mask=False)
    assert not tf32.large_logits and "reduced precision" in tf32.reason
    gpt = plan_stress(["embedding", "scaled_dot_product_attention"], reduced_precision=False,
                      has_bool_mask=True)  # a position embedding over arange(T)
    assert not gpt.large_logits and not gpt.long_sequence and gpt.masked_rows
    assert "embedding reads at positions" in gpt.reason


def test_stress_cases_follow_the_seeds_and_precede_the_variants():
    cases = _case_list([7, 9], [[[4, 5]]], ["large_logits", "masked_rows"])
    assert [c["id"] for c in cases] == ["s7", "s9", "s7_large_logits", "s7_masked_rows", "s7_v0"]
    assert [c.get("transform") for c in cases] == [None, None, "large_logits", "masked_rows", None]
    assert all(c["variant"] is None for c in cases[:4]) and cases[4]["variant"] == 0


class _Problem:
    def inputs(self):
        return [torch.randn(3, 70, 9), torch.rand(3, 70, 9) > 0.5, torch.arange(4), 2.5]


def test_large_logits_scale_floating_inputs_only():
    plain = case_inputs(_Problem(), 5, None, CPU)
    large = case_inputs(_Problem(), 5, None, CPU, "large_logits")
    assert torch.equal(large[0], plain[0] * LARGE_INPUT_SCALE)
    assert torch.equal(large[1], plain[1]) and torch.equal(large[2], plain[2]) and large[3] == 2.5
    # the largest of a million draws overflows exp() once scaled: a naive softmax cannot pass
    assert torch.isinf(torch.exp(torch.randn(1 << 20).max() * LARGE_INPUT_SCALE))


def test_masked_rows_make_rows_all_false_and_all_true_in_bool_inputs():
    plain = case_inputs(_Problem(), 5, None, CPU)
    masked = case_inputs(_Problem(), 5, None, CPU, "masked_rows")
    rows = masked[1].reshape(-1, 9)
    assert not rows[0::MASKED_ROW_PERIOD].any() and rows[1::MASKED_ROW_PERIOD].all()
    others = [r for r in range(rows.shape[0]) if r % MASKED_ROW_PERIOD > 1]
    assert torch.equal(rows[others], plain[1].reshape(-1, 9)[others])  # the rest untouched
    assert torch.equal(masked[0], plain[0])
    with pytest.raises(ValueError, match="unknown case transform"):
        case_inputs(_Problem(), 5, None, CPU, "huge")


def test_long_sequences_grow_dim_minus_2_of_every_operand_that_shares_it():
    assert long_sequence_length(64) == 259 and long_sequence_length(1024) == 2051
    assert long_sequence_length(4096) == 8195  # twice, when twice is over 2048
    shapes = [[2, 8, 64, 32], [2, 8, 64, 32], [2, 8, 64, 64], [64, 32], None]
    assert long_sequence_shapes(shapes) == [[2, 8, 259, 32], [2, 8, 259, 32], [2, 8, 259, 64],
                                            [64, 32], None]
    assert long_sequence_shapes([[16, 32], None]) is None
    masked = long_sequence_shapes([[2, 64, 32], [2, 64, 64], [64, 64], [1, 1, 64, 64]],
                                  [False, False, True, True])  # bool masks: both dims
    assert masked == [[2, 259, 32], [2, 259, 64], [259, 259], [1, 1, 259, 259]]


class _Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1), -1) @ v


class _Loaded:
    """The two methods shape_variants uses of a LoadedProblem."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit

    def build(self):
        return _Attention()

    def inputs(self):
        return [torch.randn(2, 4, 64, 16) for _ in range(3)]


def test_the_long_sequence_variant_comes_after_the_counted_ones_when_the_reference_takes_it():
    base = _Loaded().inputs()
    chosen, notes = shape_variants(_Loaded(), base, 2, lambda _s: True, long_sequence=True)
    assert len(chosen) == 3 and chosen[-1] == [[2, 4, 259, 16]] * 3
    assert notes[-1] == "long-sequence case: sequence length 64 -> 259 (dim -2 of the inputs)"
    chosen, notes = shape_variants(_Loaded(), base, 0, lambda _s: True, long_sequence=True)
    assert chosen == []  # no shape variants asked for: none at all
    chosen, notes = shape_variants(_Loaded(), base, 2, lambda _s: True, long_sequence=True,
                                   fits=lambda s: s[0][2] == 64)
    assert [[2, 4, 259, 16]] * 3 not in chosen and "does not fit in GPU memory" in notes[-1]
    # its own memory test (attention's scores grow with the square of the length)
    chosen, notes = shape_variants(_Loaded(), base, 2, lambda _s: True, long_sequence=True,
                                   long_fits=lambda _s: False)
    assert len(chosen) == 2 and "does not fit in GPU memory" in notes[-1]


def test_the_second_opinion_keeps_float64s_nan_but_not_fp32s_overflow():
    """A fully masked softmax row: PyTorch and float64 give NaN, a kernel that masks with -1e30
    uniform weights: rejected (the float64 error measure skips NaN positions, and once accepted
    it).  A sum whose fp32 reference overflows where float64 and a stable kernel stay finite:
    accepted by the second opinion."""
    from kernelstitch.agents.verifier.compare import compare_outputs, compare_with_exact

    info = [{"device": "cpu", "contiguous": True, "strides": []}]
    x = torch.randn(4, 8)
    keep = torch.rand(4, 8) > 0.3
    keep[0] = False
    reference = torch.softmax(x.masked_fill(~keep, float("-inf")), -1)
    exact = torch.softmax(x.double().masked_fill(~keep, float("-inf")), -1)
    sentinel = torch.softmax(x.masked_fill(~keep, -1e30), -1)
    assert [f.code for f in compare_outputs([reference], [sentinel], [], info, "cpu")] == ["wrong_output"]
    failures, _ = compare_with_exact([reference], [sentinel], [exact])
    assert [f.code for f in failures] == ["nan_or_inf"] and failures[0].detail["count"] == 8
    assert compare_with_exact([reference], [reference.clone()], [exact])[0] == []

    y = torch.randn(3, 16)
    y[0, 0] = 100.0
    naive = y.exp().sum(-1).log()  # fp32: exp(100) is inf
    stable = torch.logsumexp(y, -1)
    assert torch.isinf(naive[0]) and torch.isfinite(stable).all()
    assert [f.code for f in compare_outputs([naive], [stable], [], info, "cpu")] == ["wrong_output"]
    assert compare_with_exact([naive], [stable], [y.double().exp().sum(-1).log()])[0] == []
