"""The norm of a normalized tensor from its normalization's own sums (planner/norm_of_normalized.py),
with the two rewrites that let the rest fuse around it: an expand feeding broadcasting ops read
unexpanded (F.normalize's `x / denom.expand_as(x)`), and a reshape between two elementwise chains
moved after the second (`_views_between_elementwise`).  NetVLAD's intra-normalization, reshape,
global normalization (level3/46-47) then reads the normalized tensor once.  Planned and checked on
the CPU with every kernel interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = nn.Parameter(torch.randn(1, 6, 5))

    def forward(self, x):
        v = x - self.m
        {body}

def get_inputs():
    return [torch.randn(4, 6, 5)]

def get_init_inputs():
    return []
'''

NETVLAD_TAIL = "v = F.normalize(v, dim=1)\n        v = v.reshape(-1, 6 * 5)\n        return F.normalize(v)"


def _planned(tmp_path: Path, body: str):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(PROBLEM.format(body=body)))
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-6, rtol=1e-5)
    return candidate.plan


def _full_size_steps(plan, numel: int) -> list:
    """Steps that move at least the [4, 6, 5] tensor's bytes (4 bytes a value)."""
    return [s for s in plan.steps if s.estimated_bytes >= 4 * numel]


def test_netvlads_two_normalizations_read_the_tensor_twice_not_four_times(tmp_path):
    plan = _planned(tmp_path, NETVLAD_TAIL)
    assert any(s.technique == "algebraic_rewrite" and "sum over dims 1..2" in s.description for s in plan.steps)
    assert any("norm of a normalized tensor" in n for n in plan.notes)
    big = _full_size_steps(plan, 4 * 6 * 5)
    # the first norm's sums (reads x), then one kernel: (x - m) / n1 / n2 (reads x, writes the output)
    assert [s.technique for s in big] == ["fused_reduction", "fused_elementwise"], [s.description for s in plan.steps]
    assert "div, div" in big[1].description


def test_a_normalize_reads_its_input_in_the_dividing_kernel(tmp_path):
    """F.normalize's expand_as read x for its sizes only: x - m fuses into the division now."""
    plan = _planned(tmp_path, "return F.normalize(v, dim=2)")
    big = _full_size_steps(plan, 4 * 6 * 5)
    assert [s.technique for s in big] == ["fused_reduction", "fused_elementwise"]
    assert "sub" in big[1].description


@pytest.mark.parametrize("body", [
    # the second norm does not cover the first's dim: no rewrite
    "v = F.normalize(v, dim=1)\n        return F.normalize(v, dim=2)",
    # a tensor divided by another tensor's norm
    "n = (x * x).sum(1, keepdim=True).sqrt().clamp_min(1e-12)\n        y = v / n\n"
    "        return y / (y * y).sum((1, 2), keepdim=True).sqrt()",
])
def test_other_second_norms_are_left_as_written(tmp_path, body):
    plan = _planned(tmp_path, body)
    assert not any("norm of a normalized tensor" in n for n in plan.notes)


def test_a_global_norm_over_the_same_dims_without_a_reshape(tmp_path):
    """normalize over dim 1, then the norm over dims 1 and 2 directly (no reshape): rewritten."""
    body = ("v = F.normalize(v, dim=1)\n        n = (v * v).sum((1, 2), keepdim=True).sqrt()\n"
            "        return v / n.clamp_min(1e-12)")
    plan = _planned(tmp_path, body)
    assert any("norm of a normalized tensor" in n for n in plan.notes)
    assert len(_full_size_steps(plan, 4 * 6 * 5)) == 2


def test_level3_netvlad_shrunk_matches_its_module(tmp_path):
    root = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "kernelbench",
                             Path(__file__).resolve().parents[1] / ".kb" / "kernelbench") if p.is_dir()), None)
    if root is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    text = (root / "level3" / "47_NetVladNoGhostClusters.py").read_text()
    for name, value in (("batch_size", 3), ("num_features", 7), ("num_clusters", 4), ("feature_size", 8)):
        text = text.replace(f"\n{name} = ", f"\n{name} = {value}  # ", 1)
    candidate, reference, new, inputs = interpreted_problem(tmp_path, text)
    assert any("norm of a normalized tensor" in n for n in candidate.plan.notes)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-6, rtol=1e-5)


def test_two_expands_to_the_result_shape_keep_it(tmp_path):
    """a.expand(4, 6, 5) * b.expand(4, 6, 5) with a and b [1, 6, 5]: dropping both expands would
    give a [1, 6, 5] product; one is dropped (the other broadcasts it), the shape stays."""
    plan = _planned(tmp_path, "a = v[:1].expand(4, 6, 5)\n        b = (v[:1] * 2).expand(4, 6, 5)\n"
                              "        return a * b")
    assert plan.steps


@pytest.mark.parametrize("body", [
    # a small eps: eps ** 2 underflows, (sqrt(s) / eps) ** 2 does not (a zero column stays 0, not 0 / 0)
    "v = v * (v[:, :1, :1] > 0)\n        v = F.normalize(v, dim=1, eps=1e-25).reshape(-1, 30)\n"
    "        return F.normalize(v)",
    # large values: s and c1 ** 2 near the top of the fp32 range
    "v = F.normalize(v * 1e18, dim=1).reshape(-1, 30)\n        return F.normalize(v)",
])
def test_the_rewritten_norm_stays_in_range(tmp_path, body):
    plan = _planned(tmp_path, body)
    assert any("norm of a normalized tensor" in n for n in plan.notes)


def test_a_sum_with_its_own_dtype_is_not_rewritten(tmp_path):
    """dtype= on the second sum: the result's dtype is the caller's, not the first sum's."""
    body = "y = F.normalize(v.half(), dim=1)\n        return (y * y).sum((1, 2), keepdim=True, dtype=torch.float32)"
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(PROBLEM.format(body=body)))
    assert not any("norm of a normalized tensor" in n for n in candidate.plan.notes)
    with torch.no_grad():
        got, want = new(*inputs), reference(*inputs)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)  # fp16 normalization, computed in fp32


INT_EXPAND = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("p", torch.tensor(2 ** 30))

    def forward(self, x):
        i = (x * 100).int()
        return (i * self.p.expand(4, 6, 5)).float().sum()

def get_inputs():
    return [torch.randn(4, 6, 5)]

def get_init_inputs():
    return []
"""


def test_an_expanded_0d_tensor_keeps_its_type_promotion(tmp_path):
    """A 0-d int64 buffer expanded against int32 values promotes the product to int64; read
    unexpanded it would promote like a scalar (int32, overflowing)."""
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(INT_EXPAND))
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs))
