"""Transposed convolutions as 3xTF32 on the GPU: the splitting pass's layout against PyTorch's
split, and the whole generated program of the `conv3xtf32` variant against strict fp32 and a
float64 convolution (accuracy against cuDNN fp32's and TF32's), with the caller's cuDNN TF32
setting restored after forward."""

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
from kernelstitch.agents.planner.precision import with_precision
from kernelstitch.agents.planner.variants import propose_variants

from kernelstitch.core.problem import import_file

F = torch.nn.functional

SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose3d(24, 16, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.tanh(self.up(x))


def get_inputs():
    return [torch.randn(4, 24, 10, 11, 9)]


def get_init_inputs():
    return []
'''


def torch_split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hi = ((t.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)
    return hi, t - hi


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("conv3x")
    source = folder / "convt.py"
    source.write_text(SOURCE)
    graph = capture(source)
    strict = with_precision(plan_builtin(graph), "strict")  # the variant's precision
    variant = next(v for v in propose_variants(graph, limit=8, default=strict) if v.name == "conv3xtf32")
    path = write_candidate(code_builtin(variant.plan, source, folder / "model_new.py"), folder)
    return import_file(source), import_file(path)


def test_the_split_parts_lie_side_by_side(program):
    _, new = program
    ks = new._KS  # the program's extension (loaded on first use)
    x = torch.randn(3, 5, 7, 6, device="cuda")
    hi, lo = torch_split(x)
    assert torch.equal(ks.ks_split_cat_tf32(x, 1, False), torch.cat([lo, hi, hi], 1))
    assert torch.equal(ks.ks_split_cat_tf32(x, 0, True), torch.cat([hi, lo, hi], 0))
    special = torch.tensor([0x7FFFFFFF, 0x7FC00000, 0x7F800000, 0xFF800000 - (1 << 32), 0x7F7FFFFF],
                           dtype=torch.int32, device="cuda").view(torch.float32)  # NaNs, +-Inf, FLT_MAX
    parts = ks.ks_split_cat_tf32(special.view(1, 5), 1, False).view(3, 5)
    assert torch.isnan(parts[1, :2]).all() and torch.equal(parts[1, 2:4], special[2:4])
    assert torch.equal(parts[0, :4], torch.zeros(4, device="cuda"))  # no remainder of a non-finite value
    assert torch.isfinite(parts[1, 4]) and parts[0, 4] + parts[1, 4] == special[4]  # FLT_MAX: no overflow
    odd = torch.randn(2, 3, 5, device="cuda")[:, :, 1:]  # a strided view, rows of 4 floats at odd offsets
    odd_hi, odd_lo = torch_split(odd.contiguous())
    assert torch.equal(ks.ks_split_cat_tf32(odd, 1, False), torch.cat([odd_lo, odd_hi, odd_hi], 1))


def test_the_program_is_as_accurate_as_fp32_and_restores_tf32(program):
    ref_mod, new = program
    torch.manual_seed(0)
    ref = ref_mod.Model().cuda()
    model = new.ModelNew().cuda()
    model.load_state_dict(ref.state_dict())
    x = ref_mod.get_inputs()[0].cuda()
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        want = ref(x)
        got = model(x)
        assert torch.backends.cudnn.allow_tf32 is False  # forward turned it on for one call only
        exact = torch.tanh(F.conv_transpose3d(x.double(), ref.up.weight.double(), ref.up.bias.double(),
                                              stride=2, padding=1))
        torch.backends.cudnn.allow_tf32 = True
        tf32 = ref(x)
        torch.backends.cudnn.allow_tf32 = False
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    rms = exact.pow(2).mean().sqrt()

    def err(y):
        return float((y.double() - exact).abs().max() / rms)

    print(f"largest error x RMS: 3xTF32 conv {err(got):.2e}, cuDNN fp32 {err(want):.2e}, TF32 {err(tf32):.2e}")
    assert err(got) <= 4 * err(want) + 1e-6
    assert err(got) * 20 < err(tf32)
