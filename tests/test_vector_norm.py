"""Issue 22: vector norms (`torch.norm`, `torch.linalg.vector_norm`, `x.norm(p=...)`) as the
reductions that define them (the `vector_norm` rewrite), planned and checked on the CPU with the
kernels interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return {body}

def get_inputs():
    return [torch.randn(6, 37, 5)]

def get_init_inputs():
    return []
'''

CASES = {
    "frobenius": ("x / torch.norm(x, p='fro')", ["fused_reduction", "fused_elementwise"], "sum over dims 0..2"),
    "l2_rows": ("x / torch.norm(x, p=2, dim=1, keepdim=True)", ["fused_reduction", "fused_elementwise"], "sum over dim 1"),
    "l1_last": ("torch.linalg.vector_norm(x, ord=1, dim=-1) * 2", ["fused_reduction"], "sum over dim 2"),
    "inf_dims": ("torch.linalg.vector_norm(x.relu(), ord=float('inf'), dim=(1, 2))", ["fused_reduction"], "amax over dims 1..2"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_norms_plan_as_reductions_and_match_torch(name, tmp_path):
    body, techniques, summary = CASES[name]
    candidate, reference, new, x = interpreted_problem(tmp_path, textwrap.dedent(TEMPLATE.format(body=body)))
    assert [s.technique for s in candidate.plan.steps] == techniques
    assert summary in candidate.plan.steps[0].description
    with torch.no_grad():
        torch.testing.assert_close(new(*x), reference(*x), atol=1e-5, rtol=1e-5)


def test_other_orders_stay_pytorch_calls(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(TEMPLATE.format(body="torch.linalg.vector_norm(x, ord=3, dim=1)")))
    plan = plan_builtin(capture(path))
    assert [s.technique for s in plan.steps] == ["pytorch_fallback"]
