"""group_norm / instance_norm as their groups' batch statistics, the normalization fused into the
reduction that reads it (planner/group_norm_stats.py, the `gn-stats` variant): which modules get
the variant, and its programs against their modules on the CPU with every kernel interpreted (the
statistics kernel's two layouts run on a GPU: tests/test_group_norm_stats_gpu.py)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from kernelstitch.agents.verifier.declaration import CandidateOrigin
from kernelstitch.agents.verifier.static_checks import check_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_program  # noqa: E402

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv{d}d(3, 8, 3)
        self.norm = {norm}
        self.scale = nn.Parameter(torch.randn(8, {ones}))

    def forward(self, x):
        x = self.conv(x)
        y = self.norm(x)
        return {tail}

def get_inputs():
    return [torch.randn({shape})]

def get_init_inputs():
    return []
'''

# (conv dims, norm module, the forward's tail, input shape)
CASES = {
    "logsumexp_with_residual": (2, "nn.GroupNorm(4, 8)",
                                "torch.logsumexp(x + torch.nn.functional.hardswish(torch.tanh(y)), dim=1, keepdim=True)",
                                "2, 3, 9, 7"),
    "scaled_max_pool": (2, "nn.GroupNorm(2, 8)",
                        "torch.clamp(torch.nn.functional.max_pool2d(y * self.scale, 2), 0.0, 1.0)", "3, 3, 10, 11"),
    "mean_3d": (3, "nn.GroupNorm(4, 8)", "y.mean(dim=[1, 2, 3, 4])", "2, 3, 6, 5, 7"),
    "instance_norm_max": (3, "nn.InstanceNorm3d(8)", "torch.amax(torch.clamp(y, -0.5, 0.5) * self.scale, dim=1)",
                          "2, 3, 5, 6, 4"),
    "no_affine": (2, "nn.GroupNorm(8, 8, affine=False)", "y.sum(dim=(2, 3))", "2, 3, 6, 6"),
}


def _write(tmp_path: Path, name: str) -> Path:
    d, norm, tail, shape = CASES[name]
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(PROBLEM.format(d=d, norm=norm, tail=tail, shape=shape, ones=", ".join(["1"] * d))))
    return path


@pytest.mark.parametrize("name", CASES)
def test_the_gn_stats_variant_computes_what_the_module_computes(name, tmp_path):
    path = _write(tmp_path, name)
    variants = {v.name: v for v in propose_variants(capture(path), None)}
    variant = variants["gn-stats"]
    # the statistics read a channels-last conv output as it lies: the default's layout is kept
    assert variant.plan.host.channels_last == variants["default"].plan.host.channels_last
    techniques = [s.technique for s in variant.plan.steps]
    assert "group_norm statistics per (sample, group" in " ".join(s.description for s in variant.plan.steps)
    assert not any("group_norm over" in s.description for s in variant.plan.steps), techniques
    # the default keeps the group_norm kernel: the variant is measured, not assumed
    assert any("group_norm over" in s.description for s in variants["default"].plan.steps)
    candidate = code_builtin(variant.plan, path, tmp_path / "model_new.py")
    program, reference, new, inputs = interpreted_program(tmp_path, path, candidate)
    assert check_files(program, path, origin=CandidateOrigin.BUILTIN).reasons == []
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=2e-5, rtol=2e-5)


def test_a_group_norm_whose_value_is_returned_keeps_its_kernel(tmp_path):
    """Its normalized tensor is stored anyway: the group_norm kernel (statistics and apply in one
    step) is already one read fewer than statistics + a separate apply."""
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(PROBLEM.format(d=2, norm="nn.GroupNorm(4, 8)", tail="torch.tanh(y), y.sum()",
                                                   shape="2, 3, 8, 8", ones="1, 1")))
    assert not {v.name for v in propose_variants(capture(path), None)} & {"gn-stats"}


LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 16)
        self.norm = nn.GroupNorm(4, 16)

    def forward(self, x):
        return torch.min(self.norm(self.fc(x)), dim=1, keepdim=True)[0]

def get_inputs():
    return [torch.randn(5, 6)]

def get_init_inputs():
    return []
'''


def test_a_two_dim_group_norm_before_a_min(tmp_path):
    """level2/75's shape: [N, C] groups (no spatial dims), read by torch.min(dim=1)'s values."""
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(LINEAR))
    variant = {v.name: v for v in propose_variants(capture(path), None)}["gn-stats"]
    candidate = code_builtin(variant.plan, path, tmp_path / "model_new.py")
    _, reference, new, inputs = interpreted_program(tmp_path, path, candidate)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), atol=2e-5, rtol=2e-5)
