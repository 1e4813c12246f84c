"""The bindings' choice of the elementwise tiled (transposing) path, run on this machine: the
binding prelude (agents/coder/codegen/cuda/ks_binding.h) compiled with g++ against the CPU
torch wheel (kernelstitch.bench.preflight's include flags) into a small extension, and its
ks_tiled_operand / ks_channels_last_operand asked about CPU tensors of every layout.  Strides
are the same on either device, so these are the views a GPU binding takes."""

from __future__ import annotations

import pytest
import torch

PROBE = '''
#include "ks_binding.h"
std::vector<int64_t> tiled_view(std::vector<at::Tensor> ts, std::vector<int64_t> shape, bool any_dim) {
  std::vector<at::Tensor*> ps;
  for (auto& t : ts) ps.push_back(&t);
  const KsTiledView v = ks_tiled_operand(ps, c10::IntArrayRef(shape), any_dim);
  return {v.operand, v.N, v.C, v.S};
}
int64_t channels_last_operand(std::vector<at::Tensor> ts, std::vector<int64_t> shape) {
  std::vector<at::Tensor*> ps;
  for (auto& t : ts) ps.push_back(&t);
  return ks_channels_last_operand(ps, c10::IntArrayRef(shape));
}
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    from kernelstitch.agents.coder.codegen import EXTRA_CFLAGS
    from torch.utils.cpp_extension import load_inline

    from kernelstitch.bench.preflight import host_include_flags

    scratch = tmp_path_factory.mktemp("tiled_view")
    flags = host_include_flags(scratch)
    if flags is None:
        pytest.skip("needs g++, nvcc's CUDA headers and torch's c10/cuda headers")
    build = scratch / "build"
    build.mkdir()
    return load_inline(name="ks_tiled_view_probe", cpp_sources=[PROBE],
                       functions=["tiled_view", "channels_last_operand"],
                       extra_cflags=[*(f for f in EXTRA_CFLAGS if f.startswith("-O")), *flags],
                       build_directory=str(build), verbose=False)


def _view(probe, tensors, any_dim=True):
    return tuple(probe.tiled_view(list(tensors), list(tensors[0].shape), any_dim))


def _einsum_output(b=2, c=2, l=64, h=8, p=16):  # noqa: E741 (the einsum's letters)
    """torch.einsum's Y_diag in level3/48 ([b, c, l, h, p], dense as [b, c, h, p, l])."""
    C, B = torch.randn(b, c, l, h, 4), torch.randn(b, c, l, h, 4)
    L, X = torch.randn(b, h, c, l, l), torch.randn(b, c, l, h, p)
    return torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)


@pytest.mark.slow
def test_a_permuted_einsum_output_is_read_through_tiles_only_on_request(probe):
    """level3/48's Y_diag + Y_off: the einsum output is [b, c, l, h, p] stored [b, c, h, p, l],
    i.e. transposed at dim 2: with tiled_any_dim the tiled kernels read it as [N = b * c,
    C = l, S = h * p]; without it (the default) nothing changes: no operand, the flat kernels."""
    y_diag = _einsum_output()
    assert y_diag.stride() == (16384, 8192, 1, 1024, 64)  # torch's layout (the premise)
    y_off = torch.randn(y_diag.shape)
    assert _view(probe, [y_diag, y_off]) == (0, 4, 64, 128)
    assert _view(probe, [y_off, y_diag]) == (1, 4, 64, 128)
    assert _view(probe, [y_diag, y_off], any_dim=False) == (-1, 0, 0, 0)


@pytest.mark.slow
def test_channels_last_keeps_its_view_and_comes_first(probe):
    """Channels-last (dim 1) is found with or without any_dim and before any other dim; the old
    test (ks_channels_last_operand) agrees; contiguous operands and views that are not one
    transposition take no tiled path."""
    nchw = torch.randn(2, 8, 5, 6)
    nhwc = nchw.contiguous(memory_format=torch.channels_last)
    for any_dim in (False, True):
        assert _view(probe, [nchw, nhwc], any_dim) == (1, 2, 8, 30)
    assert probe.channels_last_operand([nchw, nhwc], [2, 8, 5, 6]) == 1
    assert _view(probe, [nchw, nchw.clone()]) == (-1, 0, 0, 0)  # all contiguous
    # [2, 8, 5, 6] stored as [5, 2, 6, 8]: not dense in [N, S, C] order for any split
    odd = torch.randn(5, 2, 6, 8).permute(1, 3, 0, 2)
    assert odd.shape == (2, 8, 5, 6) and _view(probe, [nchw, odd]) == (-1, 0, 0, 0)
    assert probe.channels_last_operand([odd], [2, 8, 5, 6]) == -1


@pytest.mark.slow
def test_transposed_matrices_and_size_one_dims(probe):
    """A transposed matrix is transposed at dim 0 (N = 1); size-1 dims do not break the dense
    test; a broadcast operand (not full size) is never the tiled one; one channel (C = 1) takes no
    tiled path, nor (at dims other than 1) fewer than 32 positions; the grid's N bound (65535)."""
    a = torch.randn(48, 40)
    assert _view(probe, [a, torch.randn(40, 48).t()]) == (1, 1, 48, 40)
    assert _view(probe, [torch.randn(40, 48).t(), a], any_dim=False) == (-1, 0, 0, 0)
    assert _view(probe, [torch.randn(3, 40).t()]) == (-1, 0, 0, 0)  # [40, 3]: S = 3 < 32
    x = torch.randn(3, 1, 40, 7).transpose(2, 3)  # [3, 1, 7, 40] stored [3, 1, 40, 7]
    assert _view(probe, [x]) == (0, 3, 7, 40)  # transposed at dim 2 (dim 1, one channel, is skipped)
    assert _view(probe, [torch.randn(3, 1, 7, 40), torch.randn(40, 1).t()]) == (-1, 0, 0, 0)
    wide = torch.randn(70000, 2, 4).transpose(1, 2).contiguous().transpose(1, 2)  # N = 70000 > 65535
    assert _view(probe, [wide]) == (-1, 0, 0, 0)
    split = torch.randn(7, 10000, 40, 2).transpose(2, 3)  # transposed at dim 2: N = 70000 again
    assert _view(probe, [split]) == (-1, 0, 0, 0)
    assert _view(probe, [torch.randn(6, 1000, 40, 2).transpose(2, 3)]) == (0, 6000, 2, 40)  # N = 6000 fits
