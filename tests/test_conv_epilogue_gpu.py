"""The direct convolution + epilogue kernel on a GPU (coder/codegen/conv_epilogue.py) against
torch in float64: odd spatial sizes (partial row and column tiles), output channels not a
multiple of the block's 32, strides, padding, 1 x 1 and rectangular kernels, more input channels
than one staged chunk (the block-a-tile kernel), the persistent kernel's walk over more tiles
than resident blocks, its 16-byte row copies (aligned and not), a full-size and a per-channel epilogue operand, two outputs, pooled stores
(max and avg windows tiling the output), a non-contiguous input, an empty batch, and the binding's
refusals."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dataclasses import replace  # noqa: E402

from kernelstitch.agents.coder.codegen import ElementwiseOp, ElementwiseSpec, TensorArg  # noqa: E402
from kernelstitch.agents.coder.codegen.conv_epilogue import emit_conv_epilogue  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import ConvEpilogueSpec, conv_epilogue_staged_channels  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402
from test_conv_epilogue import pool_specs  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

F = torch.nn.functional
f32 = lambda n: TensorArg(n, "float32")  # noqa: E731
# y: the conv output (operand 0); b: per channel [C, 1, 1]; z: full size
CHAIN = ElementwiseSpec(name="e", inputs=(f32("y"), f32("b"), f32("z")),
                        ops=(ElementwiseOp("add", ("y", "b"), "t"), ElementwiseOp("mish", ("t",), "u"),
                             ElementwiseOp("mul", ("u", "z"), "o")),
                        outputs=("u", "o"), out_dtype="float32")
RELU = ElementwiseSpec(name="e", inputs=(f32("b"), f32("y")),
                       ops=(ElementwiseOp("add", ("y", "b"), "t"), ElementwiseOp("relu", ("t",), "o")),
                       outputs=("o",), out_dtype="float32")
GEOMETRY = {  # name: (kernel, stride, padding, staged input channels: None = what fits)
    "k3": ((3, 3), (1, 1), (0, 0), None),
    "k3s2p1": ((3, 3), (2, 2), (1, 1), None),
    "k1": ((1, 1), (1, 1), (0, 0), None),
    "k3x5p": ((3, 5), (1, 1), (1, 2), None),
    "k3_chunks": ((3, 3), (1, 1), (1, 1), 2),  # 2 channels a chunk: the chunk loop and its barrier
}


def specs() -> list[ConvEpilogueSpec]:
    out = []
    for g, (k, s, p, ci) in GEOMETRY.items():
        tile = ci or conv_epilogue_staged_channels(k, s, 8)
        out.append(ConvEpilogueSpec(f"chain_{g}", f32("x"), f32("w"), k, s, p, CHAIN, 0, tile))
        out.append(ConvEpilogueSpec(f"relu_{g}", f32("x"), f32("w"), k, s, p, RELU, 1, tile))
    maxpool, avgpool = pool_specs()  # tests/test_conv_epilogue.py's: level2/82's max pool, an avg pool
    out.append(ConvEpilogueSpec("maxpool_k3", f32("x"), f32("w"), (3, 3), (1, 1), (0, 0), maxpool, 0, 8))
    out.append(ConvEpilogueSpec("avgpool_k3p1", f32("x"), f32("w"), (3, 3), (1, 1), (1, 1), avgpool, 0, 8))
    return out


# the persistent kernel's 16-byte row copies (emit_conv_epilogue(vector_copy=True), not yet a
# default): every stride-1 geometry's chain, name suffix _vec (rows aligned when W % 4 == 0 and
# the padding is 0 or a multiple of 4; otherwise the 4-byte copies)
VECTOR_COPY = ("k3", "k3x5p", "k1")


def vector_copy_kernels() -> list:
    named = {s.name: s for s in specs()}
    return [emit_conv_epilogue(replace(named[f"{chain}_{g}"], name=f"{chain}_{g}_vec"), vector_copy=True)
            for g in VECTOR_COPY for chain in ("chain", "relu")]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_conv_epilogue_gpu_tests", [*specs(), *vector_copy_kernels()])


def reference(x, w, stride, padding, b, z=None):
    y = F.conv2d(x.double(), w.double(), None, stride, padding)
    t = y + b.double()
    if z is None:
        return torch.relu(t)
    u = F.mish(t)
    return u, u * z.double()


def check_chains(ext, geometry: str, x, cout: int, suffix: str = ""):
    """chain_<geometry><suffix> (mish chain: two outputs, a per-channel and a full-size operand)
    and relu_<geometry><suffix> (its bias as [1, C, 1, 1]) on x against float64 torch; returns
    the weight and bias drawn."""
    (kh, kw), stride, padding, _ = GEOMETRY[geometry]
    n, cin, h, w = x.shape
    wt = torch.randn(cout, cin, kh, kw, device="cuda") * 0.3
    b = torch.randn(cout, 1, 1, device="cuda")
    ho = (h + 2 * padding[0] - kh) // stride[0] + 1
    wo = (w + 2 * padding[1] - kw) // stride[1] + 1
    z = torch.randn(n, cout, ho, wo, device="cuda")
    u, o = getattr(ext, f"chain_{geometry}{suffix}")(x, wt, b, z)
    want_u, want_o = reference(x, wt, stride, padding, b, z)
    assert u.shape == (n, cout, ho, wo) and u.is_contiguous() and o.is_contiguous()
    torch.testing.assert_close(u.double(), want_u, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(o.double(), want_o, rtol=1e-4, atol=1e-4)
    got = getattr(ext, f"relu_{geometry}{suffix}")(x, wt, b.view(-1)[None, :, None, None])
    torch.testing.assert_close(got.double(), reference(x, wt, stride, padding, b), rtol=1e-4, atol=1e-4)
    return wt, b


@pytest.mark.parametrize("geometry", list(GEOMETRY))
@pytest.mark.parametrize("n, cin, cout, h, w", [(2, 8, 64, 37, 45), (1, 3, 20, 9, 70), (3, 5, 33, 16, 31)])
def test_chain_with_two_outputs_and_a_full_operand(ext, geometry, n, cin, cout, h, w):
    check_chains(ext, geometry, torch.randn(n, cin, h, w, device="cuda"), cout)


@pytest.mark.parametrize("n, cin, cout, h, w", [(2, 8, 64, 37, 45), (1, 3, 20, 70, 9), (3, 8, 33, 10, 131)])
def test_pooled_stores(ext, n, cin, cout, h, w):
    """level2/82's 4 x 4 max pool after tanh * 2 + biases (odd sizes: partial windows dropped, as
    torch's floor mode), and a 2 x 8 avg pool with an epilogue operand."""
    x = torch.randn(n, cin, h, w, device="cuda")
    wt = torch.randn(cout, cin, 3, 3, device="cuda") * 0.3
    cb, b = torch.randn(cout, 1, 1, device="cuda"), torch.randn(cout, 1, 1, device="cuda")
    y = F.conv2d(x.double(), wt.double())
    want = F.max_pool2d(torch.tanh(y + cb.double()) * 2.0 + b.double(), 4)
    got = ext.maxpool_k3(x, wt, cb, b)
    assert got.shape == want.shape and got.is_contiguous()
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    y1 = F.conv2d(x.double(), wt.double(), None, 1, 1)
    z = torch.randn(n, cout, y1.shape[2] // 2, y1.shape[3] // 8, device="cuda")
    want = torch.sigmoid(F.avg_pool2d(y1, (2, 8))) * z.double()
    got = ext.avgpool_k3p1(x, wt, z)
    assert got.shape == want.shape
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("geometry", ["k3", "k3s2p1", "k3x5p"])
def test_the_persistent_walk_over_more_tiles_than_resident_blocks(ext, geometry):
    """Thousands of (channel block, sample, tile) units: each resident block of the persistent
    kernel walks many, its next tile's input copied while it computes, its weights restaged where
    its walk crosses into another channel block (70 channels: a partial third block)."""
    n, cin, cout, h, w = 24, 8, 70, 67, 67
    (kh, kw), stride, padding, _ = GEOMETRY[geometry]
    ho, wo = (h + 2 * padding[0] - kh) // stride[0] + 1, (w + 2 * padding[1] - kw) // stride[1] + 1
    units = 3 * n * -(-ho // 8) * -(-wo // 32)  # channel blocks x samples x tiles of 8 x 32
    assert units > 3 * torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(n, cin, h, w, device="cuda")
    wt, b = check_chains(ext, geometry, x, cout)
    if geometry == "k3":
        cb = torch.randn(cout, 1, 1, device="cuda")
        want = F.max_pool2d(torch.tanh(F.conv2d(x.double(), wt.double()) + cb.double()) * 2.0 + b.double(), 4)
        torch.testing.assert_close(ext.maxpool_k3(x, wt, cb, b).double(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("geometry", VECTOR_COPY)
@pytest.mark.parametrize("n, cin, cout, h, w", [(24, 8, 70, 67, 68), (2, 8, 64, 37, 44), (3, 5, 33, 16, 31)])
def test_the_16_byte_row_copies(ext, geometry, n, cin, cout, h, w):
    """W a multiple of 4 (68, 44: the 16-byte copies, with many units a block for the first) and
    not (31: the 4-byte copies of the same kernel); k3x5p pads by 2 columns, so its rows start
    off a 16-byte boundary and take the 4-byte copies too; a storage offset misaligns x."""
    base = torch.randn(n * cin * h * w + 1, device="cuda")
    for x in (base[:-1].view(n, cin, h, w), base[1:].view(n, cin, h, w)):  # aligned, then 4 bytes off
        check_chains(ext, geometry, x, cout, "_vec")


def test_a_non_contiguous_input_and_an_empty_batch(ext):
    x = torch.randn(2, 19, 23, 8, device="cuda").permute(0, 3, 1, 2)  # channels-last memory
    wt = torch.randn(40, 8, 3, 3, device="cuda")
    b = torch.randn(40, 1, 1, device="cuda")
    torch.testing.assert_close(ext.relu_k3(x, wt, b).double(), reference(x, wt, (1, 1), (0, 0), b),
                               rtol=1e-4, atol=1e-4)
    empty = ext.relu_k3(torch.randn(0, 8, 19, 23, device="cuda"), wt, b)
    assert empty.shape == (0, 40, 17, 21)


def test_the_binding_refuses_bad_operands(ext):
    x = torch.randn(2, 8, 19, 23, device="cuda")
    with pytest.raises(RuntimeError, match="weight must be"):
        ext.relu_k3(x, torch.randn(40, 8, 5, 5, device="cuda"), torch.randn(40, 1, 1, device="cuda"))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        ext.relu_k3(x, torch.randn(40, 8, 3, 3, device="cuda"), torch.randn(7, 1, 1, device="cuda"))
    with pytest.raises(RuntimeError, match="dtype"):
        ext.relu_k3(x.double(), torch.randn(40, 8, 3, 3, device="cuda"), torch.randn(40, 1, 1, device="cuda"))
