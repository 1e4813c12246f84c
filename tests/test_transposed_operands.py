"""Issue 22: `x.T` (aten.numpy_T) is a view the wrapper takes in PyTorch, so a GEMM reading a
transposed operand is planned as a GEMM (it was a PyTorch fallback step); checked on the CPU."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul({expr})

def get_inputs():
    return [torch.randn(20, 20), torch.randn(20, 20)]  # square: every transpose combination is valid

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("expr", ["a.T, b.T", "a.T, b", "a, b.T"])
def test_a_gemm_of_transposed_operands_is_one_gemm_step(expr, tmp_path):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(TEMPLATE.format(expr=expr)))
    assert [s.technique for s in candidate.plan.steps] == ["gemm_epilogue"]
    assert "numpy_T" in (tmp_path / "model_new.py").read_text()  # the view, taken by the wrapper
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-4, rtol=1e-4)
