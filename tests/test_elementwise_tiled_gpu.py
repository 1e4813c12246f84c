"""The elementwise kernels' `tiled_any_dim` form on a GPU (emit_elementwise(spec,
tiled_any_dim=True), off by default): an operand stored transposed at any dim (not only
channels-last) is read by the tiled kernels over its [N, C, S] view (ks_tiled_operand), where the
default reads it with the scalar kernel.  Values against torch and the default form, and the
kernel that ran.  (tests/test_tiled_view.py checks the views chosen, on CPU tensors.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import ElementwiseOp, TensorArg  # noqa: E402
from kernelstitch.agents.coder.codegen.elementwise import emit_elementwise  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import ElementwiseSpec  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_elementwise_strided_gpu import _kernel_names  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
E = ElementwiseOp


def add_scale_spec(name: str, dtype: str = "float32", outputs: int = 1) -> ElementwiseSpec:
    """level3/48's last step, Y_diag + Y_off, and a scaled copy as a second output on request."""
    ops = (E("add", ("a", "b"), "o"),) + ((E("mul", ("o", 0.5), "h"),) if outputs == 2 else ())
    return ElementwiseSpec(name, (TensorArg("a", dtype), TensorArg("b", dtype)), ops,
                           ("o", "h")[:outputs], dtype)


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_elementwise_tiled_gpu_tests", [
        emit_elementwise(add_scale_spec("ew_tiled_any"), tiled_any_dim=True),
        emit_elementwise(add_scale_spec("ew_tiled_default")),
        emit_elementwise(add_scale_spec("ew_tiled_any_h", "float16"), tiled_any_dim=True),
        emit_elementwise(add_scale_spec("ew_tiled_any2", outputs=2), tiled_any_dim=True),
    ])


def _transposed_at(shape, k, dtype=torch.float32):
    """A tensor of `shape` stored with dim k moved innermost (dense in [N, S, C] order)."""
    stored = torch.randn([n for j, n in enumerate(shape) if j != k] + [shape[k]], device="cuda", dtype=dtype)
    return stored.movedim(-1, k)


# (label, shape, dim k the first operand is transposed at)
CASES = [
    ("level3/48's Y_diag, [b, c, l, h, p] stored [b, c, h, p, l]", (3, 2, 64, 8, 16), 2),
    ("odd sizes at dim 2", (2, 3, 37, 5, 7), 2),
    ("a transposed matrix", (100, 67), 0),
    ("few channels (the narrow kernel)", (4, 6, 5, 40), 2),
    ("transposed at dim 3 of 5", (2, 3, 4, 40, 33), 3),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_an_operand_transposed_at_any_dim_takes_the_tiled_kernels(ext, case):
    _, shape, k = case
    torch.manual_seed(len(shape) * 31 + k)
    a = _transposed_at(shape, k)
    assert not a.is_contiguous() and a.stride(k) == 1
    b = torch.randn(shape, device="cuda")
    want = a + b
    got = ext.ew_tiled_any(a, b)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(ext.ew_tiled_default(a, b), want, rtol=0, atol=0)
    # either operand may be the transposed one
    torch.testing.assert_close(ext.ew_tiled_any(b, a), b + a, rtol=0, atol=0)
    names = _kernel_names(ext.ew_tiled_any, a, b)
    assert any("ew_tiled_any_nhwc" in n for n in names), names  # the tiled kernels (or their narrow form)
    assert not any("ew_tiled_default_nhwc" in n for n in _kernel_names(ext.ew_tiled_default, a, b))


def test_half_precision_two_outputs_and_broadcast_operands(ext):
    """float16 through the tiled path; two outputs; broadcast operands beside the transposed one
    (read through their descriptors at the logical index, or once a thread where constant along
    the view's S)."""
    torch.manual_seed(3)
    a = _transposed_at((2, 3, 40, 6, 8), 2, torch.float16)
    b = torch.randn(2, 3, 40, 6, 8, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(ext.ew_tiled_any_h(a, b), a + b, rtol=0, atol=0)
    a32 = _transposed_at((2, 3, 40, 6, 8), 2)
    # a row of the [N, C, S] view's S, and one value a (n, c) row (hoisted: loaded once a thread)
    for other in (torch.randn(6, 8, device="cuda"), torch.randn(2, 3, 40, 1, 1, device="cuda"),
                  torch.randn(40, 1, 1, device="cuda")):
        o, h = ext.ew_tiled_any2(a32, other)
        torch.testing.assert_close(o, a32 + other, rtol=0, atol=0)
        torch.testing.assert_close(h, (a32 + other) * 0.5, rtol=0, atol=0)
        assert any("ew_tiled_any2_nhwc" in n for n in _kernel_names(ext.ew_tiled_any2, a32, other))


def test_layouts_that_are_not_one_transposition_keep_the_flat_kernels(ext):
    """Contiguous operands, a channels-last one (dim 1, the tiled path by default too) and a
    double permutation: the chosen kernels and torch's values."""
    x = torch.randn(2, 8, 5, 6, device="cuda")
    nhwc = x.contiguous(memory_format=torch.channels_last)
    odd = torch.randn(5, 2, 6, 8, device="cuda").permute(1, 3, 0, 2)
    for label, a, tiled in [("contiguous", x, False), ("channels-last", nhwc, True), ("two permutations", odd, False)]:
        torch.testing.assert_close(ext.ew_tiled_any(a, x), a + x, rtol=0, atol=0, msg=label)
        names = _kernel_names(ext.ew_tiled_any, a, x)
        assert tiled == any("ew_tiled_any_nhwc" in n for n in names), (label, names)
