"""triu / tril on a GPU: the emitted kernels (tests/test_codegen.py's triangle specs, one
load_inline) against torch.triu / torch.tril over odd and batched shapes, wide and tall
matrices, NaN and infinity outside the triangle, strided and broadcast operands, 16-bit
storage; the module of tests/test_triangle.py generated and compared with its reference;
KernelBench's triangular matmul problems generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_codegen import triangle_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402
from test_triangle import TRIANGLES  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_triangle_gpu_tests", triangle_specs())


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (7, 3), (5, 33, 31), (2, 3, 129, 130), (4096, 5)], ids=str)
def test_triangles_match_torch(ext, shape):
    torch.manual_seed(sum(shape))
    x = torch.randn(*shape, device="cuda")
    assert torch.equal(ext.tri_upper(x), torch.triu(x))
    m = torch.randn(shape[-1], device="cuda")  # broadcast prologue operand
    torch.testing.assert_close(ext.tri_lower_scaled(x, m), torch.tril(x * m, -1), rtol=0, atol=0)
    b = x.bfloat16()
    assert torch.equal(ext.tri_upper_k2_bf16(b), torch.triu(b, 2))


def test_nan_and_infinity_outside_the_triangle_are_zeros(ext):
    x = torch.full((6, 6), float("nan"), device="cuda")
    x[0, 5] = float("inf")
    got = ext.tri_lower_scaled(x, torch.ones(6, device="cuda"))
    assert torch.equal(got.isnan(), torch.tril(x, -1).isnan())
    assert got[0, 5] == 0 and torch.equal(ext.tri_upper(x.t())[5, 0:1], torch.zeros(1, device="cuda"))


def test_a_transposed_view_is_read_through_its_strides(ext):
    x = torch.randn(40, 3, 70, device="cuda").transpose(0, 2)  # [70, 3, 40], not contiguous
    assert torch.equal(ext.tri_upper(x), torch.triu(x))
    with pytest.raises(RuntimeError):
        ext.tri_upper(torch.randn(5, device="cuda"))


def test_triangle_module_matches_its_reference(tmp_path):
    module_matches_reference(TRIANGLES, {}, tmp_path)


@pytest.mark.parametrize("problem", ["level1/14_Matmul_for_upper_triangular_matrices.py",
                                     "level1/15_Matmul_for_lower_triangular_matrices.py"])
def test_kernelbench_triangle_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)
