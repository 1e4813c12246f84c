"""torch.einsum as one contraction kernel on a GPU (tests/test_codegen.py's contraction specs and
every tile of Mamba2's chunk-state einsum and of a bmm, one load_inline), against float64
einsum: Mamba2's two einsums at small odd sizes, bmm over odd sizes and K up to 1024, permuted
and expanded operands, broadcast size-1 dims, empty roles (a dot product, an elementwise
product), 16-bit operands and output, a batch of more than 65535 tiles and more tiles than one
launch's grid, an empty sum (zeros), an empty output, and the binding's refusals."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.coder.codegen import ContractionSpec, TensorArg  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import CONTRACTION_TILES  # noqa: E402
from test_codegen import contraction_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

f32 = lambda n, d="float32": TensorArg(n, d)  # noqa: E731
TILES = {f"{bm}x{bn}": (bm, bn) for bm, bn in CONTRACTION_TILES}
MAMBA_STATES = "bclhn,bhcl,bclhp->bchpn"


def gpu_specs() -> list[ContractionSpec]:
    specs = list(contraction_specs())
    for t, tile in TILES.items():
        specs += [
            ContractionSpec(f"states_{t}", (f32("B"), f32("decay"), f32("X")), MAMBA_STATES, (1, 1, 0),
                            "bch", "p", "n", "l", "float32", tile),
            ContractionSpec(f"bmm_{t}", (f32("a"), f32("b")), "bij,bjk->bik", (0, 1), "b", "i", "k", "j",
                            "float32", tile),
        ]
    return specs + [
        ContractionSpec("dot", (f32("x"), f32("y")), "i,i->", (0, 1), "", "", "", "i", "float32", (1, 256)),
        ContractionSpec("ewise", (f32("x"), f32("y")), "b,b->b", (0, 1), "b", "", "", "", "float32", (1, 256)),
        ContractionSpec("bmm_f16", (f32("a", "float16"), f32("b", "float16")), "bij,bjk->bik", (0, 1), "b", "i",
                        "k", "j", "float16", (64, 64)),
    ]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_contraction_gpu_tests", gpu_specs())


def check(fn, equation, *xs, rtol=1e-4, atol=1e-4):
    """fn(*xs) against float64 einsum of the same (possibly 16-bit) values."""
    got = fn(*xs)
    want = torch.einsum(equation, *(x.double() for x in xs))
    assert got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol)
    return got


def mamba_inputs(b=3, c=2, length=5, h=3, n=7, p=9):
    """B [b, c, l, h, n], decay [b, h, c, l], X [b, c, l, h, p]: chunks of `length`."""
    return (torch.randn(b, c, length, h, n, device="cuda"), torch.rand(b, h, c, length, device="cuda"),
            torch.randn(b, c, length, h, p, device="cuda"))


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("length", [5, 17, 64])
def test_mamba2_chunk_states_every_tile(ext, tile, length):
    torch.manual_seed(length)
    check(getattr(ext, f"states_{tile}"), MAMBA_STATES, *mamba_inputs(length=length))


def test_mamba2_chunk_states_from_views(ext):
    """Mamba2 computes decay as exp(A_cumsum[..., -1:] - A_cumsum) of an [b, h, c, l] cumsum and
    B, X as chunked views: a permuted decay, a transposed X, an expanded B (one group's B for
    every head), p = 64 and n = 16 as in level3/49."""
    torch.manual_seed(1)
    b, c, length, h, n, p = 2, 3, 16, 4, 16, 64
    decay = torch.rand(b, c, length, h, device="cuda").permute(0, 3, 1, 2)
    x = torch.randn(b, c, length, p, h, device="cuda").transpose(-1, -2)
    bb = torch.randn(b, c, length, 1, n, device="cuda").expand(b, c, length, h, n)
    assert not decay.is_contiguous() and not x.is_contiguous() and bb.stride(3) == 0
    check(ext.ctr_mamba_states, MAMBA_STATES, bb, decay, x)
    check(ext.states_1x256, MAMBA_STATES, bb, decay, x)


@pytest.mark.parametrize("c", [1, 5, 37])
def test_mamba2_state_passing(ext, c):
    torch.manual_seed(c)
    w, s = torch.randn(3, 3, c, device="cuda"), torch.randn(3, c, 3, 9, 7, device="cuda")
    check(ext.ctr_mamba_passing, "bhc,bchpn->bhpn", w, s)
    check(ext.ctr_mamba_passing, "bhc,bchpn->bhpn", w, s.transpose(-1, -2).contiguous().transpose(-1, -2))


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("b, i, j, k", [(3, 67, 129, 45), (2, 70, 1024, 33), (1, 1, 1, 1), (5, 255, 3, 257)])
def test_bmm_odd_sizes_every_tile(ext, tile, b, i, j, k):
    torch.manual_seed(i + j + k)
    a, w = torch.randn(b, i, j, device="cuda"), torch.randn(b, j, k, device="cuda")
    check(getattr(ext, f"bmm_{tile}"), "bij,bjk->bik", a, w)


def test_bmm_non_contiguous_and_broadcast(ext):
    torch.manual_seed(2)
    a = torch.randn(4, 50, 70, device="cuda").transpose(1, 2)  # [4, 70, 50], i strided
    w = torch.randn(1, 50, 33, device="cuda").expand(4, 50, 33)  # stride 0 along b
    check(ext.ctr_bmm, "bij,bjk->bik", a, w)
    check(ext.bmm_64x64, "bij,bjk->bik", a, torch.randn(1, 50, 33, device="cuda"))  # size 1: broadcast
    check(ext.bmm_16x64, "bij,bjk->bik", a[:, ::2], w[..., 1::3])  # sliced: every stride non-unit


def test_gemv_single_operand_and_four_operands(ext):
    torch.manual_seed(3)
    a, x = torch.randn(300, 513, device="cuda"), torch.randn(513, device="cuda")
    check(ext.ctr_gemv, "ij,j->i", a, x)
    check(ext.ctr_gemv, "ij,j->i", a.t().contiguous().t(), x)
    check(ext.ctr_sum, "bij->bi", torch.randn(3, 70, 90, device="cuda"))
    a4 = torch.randn(5, 6, 7, 8, device="cuda").half()
    b4, d4 = torch.randn(6, 7, 8, device="cuda"), torch.randn(8, 9, 10, device="cuda")
    c4 = torch.randn(7, 8, 9, device="cuda").bfloat16()
    got = check(ext.ctr_four_f16, "abcd,bcd,cde,def->abef", a4, b4, c4, d4, rtol=2e-2, atol=2e-1)
    assert got.dtype == torch.bfloat16


def test_sixteen_bit_bmm(ext):
    torch.manual_seed(4)
    a, w = torch.randn(3, 65, 200, device="cuda").half(), torch.randn(3, 200, 70, device="cuda").half()
    got = check(ext.bmm_f16, "bij,bjk->bik", a, w, rtol=1e-2, atol=5e-2)
    assert got.dtype == torch.float16


def test_empty_roles(ext):
    torch.manual_seed(5)
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    got = check(ext.dot, "i,i->", x, y, rtol=1e-4, atol=1e-3)
    assert got.shape == ()
    check(ext.ewise, "b,b->b", x, y)
    check(ext.ewise, "b,b->b", x, torch.randn(1, device="cuda"))  # broadcast


def test_large_batches(ext):
    """70000 batch positions (more than a grid's 65535 in y or z) and 2^20 + 4099 tiles (more than
    one launch's grid: the blocks loop)."""
    torch.manual_seed(6)
    a, w = torch.randn(70000, 3, 5, device="cuda"), torch.randn(70000, 5, 2, device="cuda")
    check(ext.ctr_bmm, "bij,bjk->bik", a, w)
    x, y = torch.randn((1 << 20) + 4099, device="cuda"), torch.randn((1 << 20) + 4099, device="cuda")
    check(ext.ewise, "b,b->b", x, y)


def test_empty_sums_are_zeros_and_empty_outputs_empty(ext):
    a, w = torch.randn(3, 4, 0, device="cuda"), torch.randn(3, 0, 5, device="cuda")
    got = ext.ctr_bmm(a, w)
    assert got.shape == (3, 4, 5) and bool((got == 0).all())
    assert ext.ctr_bmm(torch.randn(0, 4, 6, device="cuda"), torch.randn(0, 6, 5, device="cuda")).shape == (0, 4, 5)
    assert ext.dot(torch.randn(0, device="cuda"), torch.randn(0, device="cuda")).item() == 0.0


def test_the_binding_refuses_bad_operands(ext):
    a, w = torch.randn(3, 4, 6, device="cuda"), torch.randn(3, 6, 5, device="cuda")
    with pytest.raises(RuntimeError, match="must have 3 dims"):
        ext.ctr_bmm(a[0], w)
    with pytest.raises(RuntimeError, match="index j"):
        ext.ctr_bmm(a, torch.randn(3, 7, 5, device="cuda"))
    with pytest.raises(RuntimeError, match="dtype"):
        ext.ctr_bmm(a.half(), w)
    with pytest.raises(RuntimeError, match="CUDA"):
        ext.ctr_bmm(a.cpu(), w.cpu())
