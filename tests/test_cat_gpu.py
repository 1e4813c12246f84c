"""Concatenation on a GPU: the emitted kernels (tests/test_codegen.py's cat specs, one
load_inline) against torch.cat over odd shapes, a per-channel operand, strided and
channels-last inputs, 16-bit storage; the fire module of tests/test_cat.py generated and compared
with its reference; KernelBench's cat problems generated and verified end to end."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from test_cat import FIRE  # noqa: E402
from test_codegen import cat_specs  # noqa: E402
from test_codegen_gpu import _kernels_run, load_kernels  # noqa: E402
from test_norms_gpu import kernelbench_problem_verifies, module_matches_reference  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_cat_gpu_tests", cat_specs())


@pytest.mark.parametrize("n, cx, cy, cz, hw", [(2, 3, 5, 1, (7, 9)), (1, 64, 64, 32, (28, 28)), (3, 1, 1, 1, (1, 1))])
def test_fused_segments_match_torch(ext, n, cx, cy, cz, hw):
    x = torch.randn(n, cx, *hw, device="cuda")
    b = torch.randn(cx, 1, 1, device="cuda")  # per-channel, read through its descriptor
    y = torch.randn(n, cy, *hw, device="cuda").contiguous(memory_format=torch.channels_last)
    z = torch.randn(n, cz, hw[1], hw[0], device="cuda").transpose(2, 3)  # strided
    want = torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1)
    got = ext.cat_fused(x, b, y, z)
    assert got.is_contiguous() and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n, cx, cy, cz, hw", [(2, 3, 40, 33, (7, 9)), (1, 64, 64, 32, (28, 28)),
                                               (2, 70, 1, 5, (1, 65)), (2, 5, 6, 7, (3, 4, 5))])
def test_channels_last_inputs_into_a_contiguous_output_take_the_transposing_kernel(ext, n, cx, cy, cz, hw):
    """A fire / inception module's last cat: NHWC (NDHWC) inputs, a per-channel bias, the output
    contiguous.  The tiled kernel reads along the channels and writes along the positions; odd
    channel counts (tiles of 32 cut inside a segment), positions not a multiple of its 64, a
    one-channel segment and 5-D tensors against torch.cat."""
    fmt = torch.channels_last if len(hw) == 2 else torch.channels_last_3d
    x, y, z = (torch.randn(n, c, *hw, device="cuda").contiguous(memory_format=fmt) for c in (cx, cy, cz))
    b = torch.randn(cx, *([1] * len(hw)), device="cuda")
    want = torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1)
    got = ext.cat_fused_tr(x, b, y, z)
    assert got.is_contiguous() and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    # a contiguous input among them: the output-order kernel, the same result
    torch.testing.assert_close(ext.cat_fused_tr(x.contiguous(), b, y, z), want, rtol=1e-6, atol=1e-6)
    # (the spec is named cat_fused_tr: its output-order kernel is cat_fused_tr_kernel<V>)
    assert any("cat_fused_tr_tr_kernel<" in k for k in _kernels_run(ext.cat_fused_tr, x, b, y, z))
    # an input cut along its last spatial dim is not dense channels-last: the output-order kernel
    wide = torch.randn(n, cy, *hw[:-1], hw[-1] + 2, device="cuda").contiguous(memory_format=fmt)
    cut = wide[..., 1:-1]
    want = torch.cat([torch.relu(x + b), cut, torch.sigmoid(z)], 1)
    torch.testing.assert_close(ext.cat_fused_tr(x, b, cut, z), want, rtol=1e-6, atol=1e-6)
    if cy > 1 and hw[-1] > 1:
        assert not any("cat_fused_tr_tr_kernel<" in k for k in _kernels_run(ext.cat_fused_tr, x, b, cut, z))


@pytest.mark.parametrize("n, cx, cy, hw", [(2, 40, 7, (5, 9)), (1, 64, 32, (28, 28))])
def test_a_transposing_cat_with_a_fused_batch_norm_apply(ext, n, cx, cy, hw):
    """A segment reading 5 operands (the NHWC input and four per-channel vectors) takes the
    2-tile form of the transposing kernel: torch.cat's values."""
    fmt = torch.channels_last
    x, y = (torch.randn(n, c, *hw, device="cuda").contiguous(memory_format=fmt) for c in (cx, cy))
    m, r, w, c = (torch.randn(cx, 1, 1, device="cuda") for _ in range(4))
    want = torch.cat([(x - m) * r * w + c, y], 1)
    got = ext.cat_bn_tr(x, m, r, w, c, y)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-5)
    assert any("cat_bn_tr_tr_kernel<2>" in k for k in _kernels_run(ext.cat_bn_tr, x, m, r, w, c, y))


@pytest.mark.parametrize("n, cx, cy, cz, hw", [(2, 3, 5, 1, (7, 9)), (1, 64, 64, 32, (28, 28))])
def test_a_cat_kept_channels_last_returns_channels_last(ext, n, cx, cy, cz, hw):
    """keep_channels_last: channels-last inputs (a per-channel bias aside) concatenate along their
    last memory dim into a channels-last result; a contiguous input among them gives the
    contiguous result, as before."""
    cl = torch.channels_last
    x, y = (torch.randn(n, c, *hw, device="cuda").contiguous(memory_format=cl) for c in (cx, cy))
    z = torch.randn(n, cz, *hw, device="cuda").contiguous(memory_format=cl)
    b = torch.randn(cx, 1, 1, device="cuda")
    want = torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1)
    got = ext.cat_fused_cl(x, b, y, z)
    assert got.shape == want.shape and got.is_contiguous(memory_format=cl) and not got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    got = ext.cat_fused_cl(x, b, y.contiguous(), z)
    assert got.is_contiguous()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cx, cy, cz, hw", [(5, 3, 2, (6, 6)), (4, 8, 12, (5, 3)), (6, 4, 4, (3, 3))])
def test_four_outputs_a_thread_match_torch(ext, cx, cy, cz, hw):
    """The 4-outputs-a-thread kernel: contiguous inputs with H * W a multiple of 4, channels-last
    inputs whose channel counts are (4, 8, 12) or not (6, 4, 4), and a misaligned view (one
    output a thread again), all against torch.cat."""
    n, cl = 2, torch.channels_last
    x, y, z = (torch.randn(n, c, *hw, device="cuda") for c in (cx, cy, cz))
    b = torch.randn(cx, 1, 1, device="cuda")

    def want(x, y, z):
        return torch.cat([torch.relu(x + b), y, torch.sigmoid(z)], 1)

    torch.testing.assert_close(ext.cat_fused(x, b, y, z), want(x, y, z), rtol=1e-6, atol=1e-6)
    storage = torch.empty(y.numel() + 1, device="cuda")
    shifted = storage[1:].view(y.shape).copy_(y)  # a 4-byte offset: not 16-byte aligned
    torch.testing.assert_close(ext.cat_fused(x, b, shifted, z), want(x, y, z), rtol=1e-6, atol=1e-6)
    xc, yc, zc = (t.contiguous(memory_format=cl) for t in (x, y, z))
    got = ext.cat_fused_cl(xc, b, yc, zc)
    assert got.is_contiguous(memory_format=cl)
    torch.testing.assert_close(got, want(x, y, z), rtol=1e-6, atol=1e-6)


def test_last_dim_half_and_size_mismatch(ext):
    a, c = torch.randn(5, 3, 7, device="cuda").half(), torch.randn(5, 3, 1, device="cuda").half()
    assert torch.equal(ext.cat_last_f16(a, c), torch.cat([a, c], -1))
    with pytest.raises(RuntimeError, match="do not match"):
        ext.cat_last_f16(a, torch.randn(5, 4, 2, device="cuda").half())


def test_fire_module_matches_its_reference(tmp_path):
    module_matches_reference(FIRE, {"batch": 3, "height": 17, "width": 5}, tmp_path)


@pytest.mark.parametrize("problem", ["level3/17_SqueezeNetFireModule.py", "level3/6_GoogleNetInceptionModule.py"])
def test_kernelbench_cat_problem_generates_and_verifies(problem, tmp_path):
    kernelbench_problem_verifies(problem, tmp_path)
