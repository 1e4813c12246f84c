"""ks_layout_swap on the GPU: the channels-last convolutions' NCHW <-> NHWC copies give exactly
PyTorch's `t.contiguous(memory_format=...)` (values and strides) on odd shapes, 4- and 2-byte
dtypes, 4-D and 5-D, both directions; other strides go through PyTorch's copy; and a generated
channels-last program still matches its module."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from kernelstitch.agents.coder.builtin import code_builtin, write_candidate
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen_gpu import _kernels_run  # noqa: E402

from kernelstitch.core.problem import import_file

SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(5, 7, 3)

    def forward(self, x):
        y = self.conv(x)
        return y, y.flatten(1).sum(1)


def get_inputs():
    return [torch.randn(3, 5, 19, 23)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layout")
    source = folder / "conv.py"
    source.write_text(SOURCE)
    plan = plan_builtin(capture(source))
    assert plan.host.channels_last
    candidate = code_builtin(plan, source, folder / "model_new.py")
    assert "ks_layout_swap(v_conv2d, False)" in candidate.source  # back to NCHW: a sum reads it
    path = write_candidate(candidate, folder)
    return import_file(source), import_file(path)


def _format(t):
    return torch.channels_last if t.dim() == 4 else torch.channels_last_3d


SHAPES = [(2, 3, 5, 7), (1, 64, 126, 126), (3, 1, 9, 9), (4, 33, 1, 1), (2, 130, 17, 3),
          (70000, 2, 2, 2), (2, 16, 3, 4, 5), (1, 5, 31, 63, 63),
          (1, 2, 4096, 2049),  # S over 65535 x 128: the long side's tiles must be grid.x
          # the vector kernels (C and S multiples of 4): 16-, 32- and 64-wide tiles, partial ones,
          # and the short-side kernel of 3, 4 and 8 channels (register transposes staged through
          # swizzled shared memory, partial tiles of quads); 8 channels over S = 25 (not a
          # multiple of 4) take the one-value kernel
          (2, 16, 20, 20), (3, 64, 12, 12), (2, 20, 9, 4), (2, 128, 7, 4), (2, 3, 16, 16),
          (2, 4, 6, 6), (2, 8, 10, 10), (2, 8, 5, 5), (2, 24, 3, 4, 5)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_both_directions_equal_pytorchs_copy(program, shape, dtype):
    ks = program[1]._KS
    x = torch.randn(*shape, device="cuda").to(dtype)
    fmt = _format(x)
    nhwc = ks.ks_layout_swap(x, True)
    want = x.contiguous(memory_format=fmt)
    assert nhwc.stride() == want.stride() and torch.equal(nhwc, want)
    back = ks.ks_layout_swap(want, False)
    assert back.is_contiguous() and torch.equal(back, x)


@pytest.mark.parametrize("shape", [(2, 64, 12, 12), (2, 8, 10, 10)])
def test_a_misaligned_tensor_takes_the_one_value_kernels(program, shape):
    """A storage offset of one element: no 16-byte vectors, the same result; aligned, the
    vector kernels run."""
    ks = program[1]._KS
    x = torch.randn(*shape, device="cuda")
    assert any("vec_kernel" in k or "short4_kernel" in k for k in _kernels_run(ks.ks_layout_swap, x, True))
    storage = torch.empty(x.numel() + 1, device="cuda")
    shifted = storage[1:].view(shape)
    shifted.copy_(x)
    nhwc = ks.ks_layout_swap(shifted, True)
    assert torch.equal(nhwc, x.contiguous(memory_format=torch.channels_last))
    ran = _kernels_run(ks.ks_layout_swap, shifted, True)
    assert any("ks_layout_swap" in k for k in ran) and not any("vec_kernel" in k or "short4_kernel" in k for k in ran), ran
    cl_storage = torch.empty(x.numel() + 1, device="cuda")
    cl = cl_storage[1:].as_strided(nhwc.shape, nhwc.stride())
    cl.copy_(nhwc)
    back = ks.ks_layout_swap(cl, False)
    assert back.is_contiguous() and torch.equal(back, x)


def test_a_tensor_already_in_the_layout_is_returned_and_other_strides_are_copied(program):
    ks = program[1]._KS
    x = torch.randn(2, 6, 5, 4, device="cuda")
    assert ks.ks_layout_swap(x, False) is x
    cl = x.contiguous(memory_format=torch.channels_last)
    assert ks.ks_layout_swap(cl, True) is cl
    odd = torch.randn(2, 5, 6, 4, device="cuda").transpose(1, 2)  # neither layout
    got = ks.ks_layout_swap(odd, True)
    assert torch.equal(got, odd) and got.is_contiguous(memory_format=torch.channels_last)


def test_the_channels_last_program_matches_its_module(program):
    original, new = program
    torch.manual_seed(0)
    ref = original.Model().cuda()
    model = new.ModelNew().cuda()
    model.load_state_dict(ref.state_dict())
    x = torch.randn(3, 5, 19, 23, device="cuda")
    with torch.no_grad():
        want, got = ref(x), model(x)
    for w, g in zip(want, got):
        assert g.is_contiguous() and torch.allclose(g, w, atol=1e-4, rtol=1e-4)
