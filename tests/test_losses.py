"""Issue 22: losses planned as one fused reduction (the `smooth_l1` and `full_reduction`
rewrites), checked on the CPU with the kernels interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.inprocess import generate_builtin

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return {body}

def get_inputs():
    return [torch.randn(9, 33) * 2, torch.randn(9, 33)]

def get_init_inputs():
    return []
'''

CASES = {  # body, the plan's techniques
    "huber_mean": ("torch.nn.functional.smooth_l1_loss(a, b)", ["fused_reduction"]),
    "huber_sum_beta": ("torch.nn.functional.smooth_l1_loss(a, b, reduction='sum', beta=0.5)", ["fused_reduction"]),
    "huber_none": ("torch.nn.functional.smooth_l1_loss(a, b, reduction='none', beta=2.0) * 3", ["fused_elementwise"]),
    "hinge": ("torch.mean(torch.clamp(1 - a * b, min=0))", ["fused_reduction"]),
    "sum_all": ("(a - b).abs().sum() + 1", ["fused_reduction"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_losses_are_one_fused_kernel_and_match_torch(name, tmp_path):
    body, techniques = CASES[name]
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(TEMPLATE.format(body=body)))
    assert [s.technique for s in candidate.plan.steps] == techniques
    with torch.no_grad():
        expected = reference(*inputs)
        torch.testing.assert_close(new(*inputs), expected, atol=1e-5, rtol=1e-5)
    if name.startswith("huber"):  # the inputs cross beta both ways: both branches are checked
        d = (inputs[0] - inputs[1]).abs()
        assert (d < 0.5).any() and (d > 2.0).any()


TRIPLET = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.TripletMarginLoss({options})

    def forward(self, a, p, n):
        return self.loss(a, p, n)

def get_inputs():
    return [torch.randn(12, 40), torch.randn(12, 40), torch.randn(12, 40) * 1.1]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("options, kernels", [("", 3), ("margin=0.5, reduction='sum'", 3),
                                              ("margin=0.1, reduction='none'", 2)])
def test_triplet_margin_loss_is_two_row_norms_and_matches_torch(options, kernels, tmp_path):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(TRIPLET.format(options=options)))
    assert [s.technique for s in candidate.plan.steps] == ["fused_reduction"] * kernels
    with torch.no_grad():
        expected = reference(*inputs)
        torch.testing.assert_close(new(*inputs), expected, atol=1e-5, rtol=1e-5)
    if "none" in options:  # the clamp at 0 is exercised: some triplets have no loss, some do
        assert (expected == 0).any() and (expected > 0).any()


def test_triplet_with_swap_or_another_norm_stays_a_pytorch_call(tmp_path):
    for options in ("swap=True", "p=1"):
        path = tmp_path / f"p_{options[:4]}.py"
        path.write_text(textwrap.dedent(TRIPLET.format(options=options)))
        candidate = generate_builtin(path, "Model", tmp_path / "model_new.py")
        assert [s.technique for s in candidate.plan.steps] == ["pytorch_fallback"], options


@pytest.mark.parametrize("call", [
    "torch.nn.functional.kl_div(torch.log(a.abs() + 0.1), b.relu(), reduction='batchmean')",
    "torch.nn.functional.kl_div(torch.log(a.abs() + 0.1), b.relu(), reduction='sum')",
    "torch.nn.functional.kl_div(torch.log(a.abs() + 0.1), b.relu(), reduction='mean')",
    "torch.nn.functional.kl_div(torch.log(a.abs() + 0.1), b.relu(), reduction='none') * 2",
    "torch.nn.functional.kl_div(a, b * 0.3, reduction='batchmean', log_target=True)",
])
def test_kl_div_is_fused_with_exact_zero_targets_and_matches_torch(call, tmp_path):
    """b.relu() has exact zeros: xlogy(0, 0) is 0 where 0 * log(0) would be NaN."""
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(TEMPLATE.format(body=call)))
    techniques = [s.technique for s in candidate.plan.steps]
    assert "pytorch_fallback" not in techniques and len(techniques) <= 2, techniques
    assert (inputs[1] <= 0).any()  # zero targets after relu
    with torch.no_grad():
        expected = reference(*inputs)
        assert torch.isfinite(expected).all()
        torch.testing.assert_close(new(*inputs), expected, atol=1e-5, rtol=1e-5)
