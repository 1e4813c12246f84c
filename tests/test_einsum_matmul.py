"""Issue 22: an einsum that is a matmul ("bijl,lk->bijk") plans as a GEMM; others stay PyTorch
calls.  Checked on the CPU with the kernels interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.planner.rewrites import _is_matmul_equation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_problem  # noqa: E402

TEMPLATE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a, b):
        return torch.einsum("{equation}", a, b)

def get_inputs():
    return [torch.randn({a_shape}), torch.randn({b_shape})]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("equation, ok", [
    ("bijl,lk->bijk", True), ("ik,kj->ij", True), ("b i l , l k -> b i k", True),
    ("ik,jk->ij", False), ("bijl,lk->bik", False), ("ii,ik->ik", False), ("...l,lk->...k", False),
    ("il,lk->ki", False), ("il,lk,kj->ij", False)])
def test_which_equations_are_a_matmul(equation, ok):
    assert _is_matmul_equation(equation.replace(" ", "")) is ok


def test_an_einsum_matmul_is_one_gemm_and_matches_torch(tmp_path):
    candidate, reference, new, inputs = interpreted_problem(tmp_path, textwrap.dedent(
        TEMPLATE.format(equation="bijl,lk->bijk", a_shape="2, 3, 4, 16", b_shape="16, 8")))
    assert [s.technique for s in candidate.plan.steps] == ["gemm_epilogue"]
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=1e-4, rtol=1e-4)
