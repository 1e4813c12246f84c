"""Elementwise ops moved across reshapes next to a reduction (the `views_through_elementwise`
rewrite) on a GPU: the spatial softmax of tests/test_views_through_elementwise.py generated and
compared with its reference at two shapes, and KernelBench's level2/38 generated and verified."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402
from test_views_through_elementwise import SLICE, SPATIAL_SOFTMAX  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("source", [SPATIAL_SOFTMAX, SLICE], ids=["spatial-softmax", "slice"])
def test_moved_ops_match_the_reference(source, tmp_path):
    module_matches_reference(source, {}, tmp_path)


def test_kernelbench_spatial_softmax_problem_generates_and_verifies(tmp_path):
    kernelbench_problem_verifies("level2/38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py", tmp_path)
