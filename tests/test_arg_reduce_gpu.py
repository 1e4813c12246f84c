"""argmax / argmin on a GPU: the emitted kernels (tests/test_codegen.py's arg-reduce specs, one
load_inline) against torch.argmax / torch.argmin over odd shapes, every path (a block per row of
32-256 threads, a thread per column), ties, NaNs and infinities, strided and broadcast operands,
16-bit storage; the module of tests/test_arg_reduce.py generated and compared with its reference;
KernelBench's argmax / argmin problems generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_arg_reduce import ARGS  # noqa: E402
from test_codegen import arg_reduce_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_arg_reduce_gpu_tests", arg_reduce_specs())


def _equal(got, want):
    assert got.dtype == want.dtype == torch.int64 and got.shape == want.shape
    assert torch.equal(got, want), (got.flatten()[:8], want.flatten()[:8])


# [outer, R, inner]-like shapes: short rows (one warp), long rows (8 warps), odd sizes, one value
@pytest.mark.parametrize("shape", [(7, 1, 3), (3, 127, 5), (2, 4099, 1), (5, 33, 1000), (1, 1, 1)], ids=str)
def test_argmax_over_dim1_and_argmin_over_rows(ext, shape):
    torch.manual_seed(sum(shape))
    x = torch.randn(*shape, device="cuda")
    _equal(ext.arg_max_dim1(x), torch.argmax(x, 1))
    m = torch.randn(shape[-1], device="cuda")  # broadcast prologue operand
    _equal(ext.arg_min_rows(x, m), torch.argmin(x * m, -1))
    _equal(ext.arg_max_all(x), torch.argmax(x))
    _equal(ext.arg_min_f16_keep(x.half()), torch.argmin(x.half(), -1, keepdim=True))


@pytest.mark.parametrize("n", [5, 300, 70000])
def test_ties_nans_and_infinities_follow_torch(ext, n):
    """The first index of the extreme wins a tie; a NaN beats every number (the first NaN)."""
    x = torch.zeros(4, n, device="cuda")
    x[1, n // 2:] = 1.0  # tie across the second half: the first of them
    x[2, n // 3] = float("nan")
    x[2, -1] = float("nan")
    x[3, :] = -float("inf")
    x[3, n - 1] = float("inf")
    m = torch.ones(n, device="cuda")
    _equal(ext.arg_min_rows(x, m), torch.argmin(x, -1))
    _equal(ext.arg_max_all(x[1:2]), torch.argmax(x[1:2]))
    _equal(ext.arg_max_all(x[2:3]), torch.argmax(x[2:3]))
    cols = x.t().contiguous().unsqueeze(0)  # [1, n, 4]: dim 1 is strided (a thread per column)
    _equal(ext.arg_max_dim1(cols), torch.argmax(cols, 1))


def test_a_transposed_view_is_read_through_its_strides(ext):
    x = torch.randn(64, 3, 50, device="cuda").transpose(0, 2)  # [50, 3, 64], not contiguous
    _equal(ext.arg_max_dim1(x), torch.argmax(x, 1))
    _equal(ext.arg_min_rows(x, torch.ones(64, device="cuda")), torch.argmin(x, -1))


def test_empty_dims_and_bad_dims_raise_or_return_empty(ext):
    assert ext.arg_max_dim1(torch.randn(0, 4, 3, device="cuda")).shape == (0, 3)
    with pytest.raises(RuntimeError):
        ext.arg_max_dim1(torch.randn(2, 0, 3, device="cuda"))
    with pytest.raises(RuntimeError):
        ext.arg_max_dim1(torch.randn(5, device="cuda"))  # dim 1 of a 1-d tensor


def test_arg_reduce_module_matches_its_reference(tmp_path):
    module_matches_reference(ARGS, {}, tmp_path)


@pytest.mark.parametrize("problem", ["level1/51_Argmax_over_a_dimension.py", "level1/52_Argmin_over_a_dimension.py"])
def test_kernelbench_arg_reduce_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)
