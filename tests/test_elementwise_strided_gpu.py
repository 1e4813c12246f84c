"""The elementwise kernels' `strided_vec` form on a GPU (emit_elementwise(spec, strided_vec=True),
the default since its s38 timing): an operand of general strides whose consecutive elements are contiguous is read
by the vector kernel, one offset per VEC elements; operands it cannot read that way (a transposed
innermost dim, rows not a multiple of VEC, a misaligned view) keep the scalar kernel.  Values
against torch, and the kernel that ran."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import ElementwiseOp, TensorArg  # noqa: E402
from kernelstitch.agents.coder.codegen.common import vector_width  # noqa: E402
from kernelstitch.agents.coder.codegen.elementwise import emit_elementwise  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import ElementwiseSpec  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
E = ElementwiseOp


def segsum_spec(name: str) -> ElementwiseSpec:
    """level3/48's segsum: exp(where(mask, a - b, -inf)) with a = x[..., :, None],
    b = x[..., None, :] and a bool [L, L] mask."""
    return ElementwiseSpec(name, (TensorArg("a", "float32"), TensorArg("b", "float32"), TensorArg("m", "bool")),
                           (E("sub", ("a", "b"), "t1"), E("where", ("m", "t1", -math.inf), "t2"),
                            E("exp", ("t2",), "o")), ("o",), "float32")


def add_spec(name: str, dtype: str = "float32") -> ElementwiseSpec:
    """a + b in one dtype (VEC 4 for float32, 8 for float16)."""
    return ElementwiseSpec(name, (TensorArg("a", dtype), TensorArg("b", dtype)),
                           (E("add", ("a", "b"), "o"),), ("o",), dtype)


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_elementwise_strided_gpu_tests", [
        emit_elementwise(segsum_spec("ew_segsum_sv"), strided_vec=True),
        emit_elementwise(segsum_spec("ew_segsum"), strided_vec=False),
        emit_elementwise(add_spec("ew_add_sv"), strided_vec=True),
        emit_elementwise(add_spec("ew_add_h_sv", "float16"), strided_vec=True),
    ])


def _kernel_names(fn, *args) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return {k.key for k in prof.key_averages()}


def _segsum_inputs(shape, L):
    torch.manual_seed(L)
    x = torch.randn(*shape, L, device="cuda").cumsum(-1)
    mask = torch.tril(torch.ones(L, L, dtype=torch.bool, device="cuda"))
    return x[..., :, None], x[..., None, :], mask


@pytest.mark.parametrize("L", [64, 16, 6])
def test_segsum_broadcast_reads_its_strided_operand_by_vectors(ext, L):
    """x[..., None, :] is a general-strides operand with contiguous rows of L: at L a multiple of
    the kernel's width the strided_vec kernel reads it by vectors (the vector kernel runs), at L =
    6 the scalar one; both equal torch, and equal the default form's values."""
    width = vector_width(["float32", "float32", "bool", "float32"])
    a, b, m = _segsum_inputs((4, 3, 2), L)
    want = torch.exp((a - b).masked_fill(~m, -math.inf))
    got = ext.ew_segsum_sv(a, b, m)
    # (ks_exp is the fast exp: within 2e-5 of torch's; the two forms must agree exactly)
    torch.testing.assert_close(got, want, rtol=2e-5, atol=0, equal_nan=True)
    torch.testing.assert_close(got, ext.ew_segsum(a, b, m), rtol=0, atol=0, equal_nan=True)
    names = _kernel_names(ext.ew_segsum_sv, a, b, m)
    kernel = f"ew_segsum_sv_kernel<{width if L % width == 0 else 1}>"
    assert width > 1 and any(kernel in n for n in names), names
    assert any("ew_segsum_kernel<1>" in n for n in _kernel_names(ext.ew_segsum, a, b, m))  # the default form


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_operands_it_cannot_read_by_vectors_keep_the_scalar_kernel(ext, dtype):
    """A row-contiguous broadcast (b[:, None, :]) takes the vector kernel (4 floats or 8 halves);
    an operand whose innermost stride is not 1, one whose rows are not a multiple of the width,
    one whose row stride is not, and a misaligned view send the launch to the scalar kernel; every
    result equals torch."""
    torch.manual_seed(0)
    dt = getattr(torch, dtype)
    fn = ext.ew_add_sv if dtype == "float32" else ext.ew_add_h_sv
    name = "ew_add_sv" if dtype == "float32" else "ew_add_h_sv"
    width = vector_width([dtype])
    full = torch.randn(8, 5, 32, device="cuda", dtype=dt)
    rows = torch.randn(8, 32, device="cuda", dtype=dt)
    storage = torch.empty(rows.numel() + 1, device="cuda", dtype=dt)
    shifted = storage[1:].view(rows.shape)
    shifted.copy_(rows)
    cases = [
        ("rows", full, rows[:, None, :], width),
        # [8, 5, 32] with strides [1, 8, 40]: innermost stride 40 (and not a channels-last layout,
        # which the tiled kernels would take)
        ("innermost stride", full, torch.randn(32, 5, 8, device="cuda", dtype=dt).permute(2, 1, 0), 1),
        ("rows of 30", full[..., :30].contiguous(), torch.randn(8, 30, device="cuda", dtype=dt)[:, None, :], 1),
        ("row stride 34", full, torch.randn(8, 34, device="cuda", dtype=dt)[:, :32][:, None, :], 1),
        ("misaligned", full, shifted[:, None, :], 1),
    ]
    for label, x, y, w in cases:
        torch.testing.assert_close(fn(x, y), x + y, rtol=0, atol=0, msg=label)
        names = _kernel_names(fn, x, y)
        assert any(f"{name}_kernel<{w}>" in n for n in names), (label, names)
