"""The masked_fill selects of tests/test_masked_fill.py generated and compared with their
module on a GPU; KernelBench's level3/50 (a causal mask built with `== 0`) verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_masked_fill import MASKS  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_masked_fill_module_matches_its_reference(tmp_path):
    module_matches_reference(MASKS, {}, tmp_path)


def test_kernelbench_relu_self_attention_generates_and_verifies(tmp_path):
    kernelbench_problem_verifies("level3/50_ReLUSelfAttention.py", tmp_path)
