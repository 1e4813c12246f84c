"""Scans on a GPU: the emitted kernels (tests/test_codegen.py's scan specs, one load_inline)
against torch.cumsum / torch.cumprod over odd shapes, every dim, strided and broadcast operands,
reversed, 16-bit storage; the module of tests/test_scan.py generated and compared with its
reference at two shapes; KernelBench's scan problems generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_codegen import mask_specs, scan_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402
from test_scan import SCANS  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# (rows, R) along the contiguous dim: a chunk tail, one value, one full chunk, many chunks
SHAPES = [(7, 1), (3, 127), (5, 128), (2, 129), (33, 1000), (4, 4097)]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_scan_gpu_tests", scan_specs() + mask_specs())


def _close(got, want, atol=1e-4, rtol=1e-4):
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cumsum_rows_and_columns(ext, shape):
    torch.manual_seed(shape[1])
    x = torch.randn(*shape, device="cuda")
    _close(ext.scan_sum(x), torch.cumsum(x, 1), atol=1e-3)  # dim 1: contiguous rows
    t = x.t().contiguous()  # [R, rows]: the scanned dim 1 is now strided... as a column scan
    _close(ext.scan_sum(t.t()), torch.cumsum(t.t(), 1), atol=1e-3)  # a transposed view
    m = torch.randn(shape[-1], device="cuda")  # broadcast prologue operand
    _close(ext.scan_masked(x, m), torch.cumsum(x * m, -1), atol=1e-3)


@pytest.mark.parametrize("shape", [(9, 5, 3), (130, 2), (1, 7)], ids=str)
def test_reversed_product_over_dim0(ext, shape):
    x = torch.rand(*shape, device="cuda") + 0.5
    _close(ext.scan_prod_rev(x), torch.cumprod(x.flip(0), 0).flip(0), rtol=1e-4)


def test_half_precision_storage_accumulates_in_fp32(ext):
    x = torch.rand(6, 3000, device="cuda")
    half, bf16 = x.half(), x.bfloat16()
    want = torch.cumsum(half.float().flip(-1), -1).flip(-1).half()
    _close(ext.scan_sum_rev_f16(half), want, atol=0.5, rtol=2e-3)
    _close(ext.scan_sum_bf16(bf16), torch.cumsum(bf16.float(), 1).bfloat16(), atol=4.0, rtol=1e-2)


def _exclusive(y, d, identity):
    first = torch.full_like(y.narrow(d, 0, 1), identity)
    return torch.cat((first, y.narrow(d, 0, y.shape[d] - 1)), d)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_exclusive_scans(ext, shape):
    """Forward exclusive sums along the contiguous dim (lane and chunk boundaries), reversed
    exclusive products along a strided dim."""
    x = torch.randn(*shape, device="cuda")
    _close(ext.scan_sum_excl(x), _exclusive(torch.cumsum(x, 1), 1, 0.0), atol=1e-3)
    p = torch.rand(*shape, device="cuda") + 0.5
    want = _exclusive(torch.cumprod(p.flip(0), 0), 0, 1.0).flip(0)
    _close(ext.scan_prod_rev_excl(p), want, rtol=1e-4)


@pytest.mark.parametrize("n", [4096, 4099, 1])
def test_bool_masks_read_as_zero_and_one(ext, n):
    """Vector loads of 4 (fp32) and 8 (fp16) bools, the scalar tail, a misaligned view."""
    x = torch.randn(n + 1, device="cuda")
    m = torch.rand(n + 1, device="cuda") > 0.5
    for xs, ms in ((x[:n], m[:n]), (x[1:], m[1:])):
        _close(ext.mask_where(xs, ms), torch.where(ms, xs, 0.0), atol=0, rtol=0)
        _close(ext.mask_mul_f16(xs.half(), ms), xs.half() * ms, atol=0, rtol=0)
    rows = torch.randn(3, n, device="cuda")
    mask = torch.rand(3, n, device="cuda") > 0.3
    _close(ext.mask_cumsum(rows, mask), torch.cumsum(rows * mask, 1), atol=1e-3)


def test_scan_module_matches_its_reference(tmp_path):
    module_matches_reference(SCANS, {}, tmp_path)


@pytest.mark.parametrize("problem", ["level1/89_cumsum.py", "level1/90_cumprod.py",
                                     "level1/91_cumsum_reverse.py", "level1/92_cumsum_exclusive.py",
                                     "level1/93_masked_cumsum.py"])
def test_kernelbench_scan_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)
