"""Issue 22 (normalisations, multi-dim reductions, transposed convolutions): group_norm and
instance_norm planned as fused reductions with their neighbours, reductions over consecutive
dims as one, conv_transpose as a library call, and a conv's bias kept in cuDNN where no kernel
follows to absorb it.  Plans and emitted sources on the CPU; tests/test_norms_gpu.py runs the
same modules on a GPU against their references."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import (
    ElementwiseOp,
    ReductionSpec,
    TensorArg,
    spec_from_json,
    spec_to_json,
)
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.ops import reduced_dims

_HEADER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
'''

# conv -> group_norm -> tanh -> a per-channel bias (level2/75's shape of program)
CONV_GROUP_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.gn = nn.GroupNorm(groups, cout)
        self.shift = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x):
        return torch.tanh(self.gn(self.conv(x))) + self.shift

batch, cin, cout, groups, height, width = 3, 3, 12, 4, 17, 19

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, cout, groups]
'''

# Linear -> GroupNorm over [N, C] -> hardtanh (level2/30)
GEMM_GROUP_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, fin, fout, groups):
        super().__init__()
        self.fc = nn.Linear(fin, fout)
        self.gn = nn.GroupNorm(groups, fout)

    def forward(self, x):
        return F.hardtanh(self.gn(self.fc(x)), -2.0, 2.0)

batch, fin, fout, groups = 5, 24, 48, 6

def get_inputs():
    return [torch.randn(batch, fin)]

def get_init_inputs():
    return [fin, fout, groups]
'''

# conv -> InstanceNorm2d (batch statistics, no affine) -> / 2 (level2/17); rows of H * W
INSTANCE_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.norm = nn.InstanceNorm2d(cout)

    def forward(self, x):
        return self.norm(self.conv(x)) / 2.0

batch, cin, cout, height, width = 2, 3, 5, 13, 11

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, cout]
'''

# InstanceNorm that tracks running statistics: training mode updates them, so it stays PyTorch
INSTANCE_NORM_RUNNING = _HEADER + '''
class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.InstanceNorm2d(c, track_running_stats=True)

    def forward(self, x):
        return self.norm(x) * 2.0

def get_inputs():
    return [torch.randn(2, 4, 8, 8)]

def get_init_inputs():
    return [4]
'''

# long groups (4 channels x 70 x 70 = 19600 values > the row kernels' 16384): the channel-span
# kernels, with a conv bias in the prologue and a per-channel shift in the epilogue; the second
# shape (4 x 62 x 62 = 15376) takes the row kernels
LONG_GROUP_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, c, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, c, 3)
        self.gn = nn.GroupNorm(groups, c)
        self.shift = nn.Parameter(torch.randn(c, 1, 1))

    def forward(self, x):
        return torch.relu(self.gn(self.conv(x))) + self.shift

batch, cin, c, groups, size = 2, 3, 8, 2, 72

def get_inputs():
    return [torch.randn(batch, cin, size, size)]

def get_init_inputs():
    return [cin, c, groups]
'''

# fp16 storage (fp32 statistics), 16-byte loads: C / G * H * W = 4 * 16 * 16
HALF_GROUP_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.gn = nn.GroupNorm(groups, c).half()

    def forward(self, x):
        return F.silu(self.gn(x))

batch, c, groups, size = 3, 16, 4, 16

def get_inputs():
    return [torch.randn(batch, c, size, size).half()]

def get_init_inputs():
    return [c, groups]
'''

# means / sums over consecutive dims (level2/23's x.mean([1, 2, 3, 4])), and one that is not
MULTI_DIM = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.relu(x).mean(dim=[1, 2, 3])
        b = x.sum(dim=[-2, -1], keepdim=True) * 0.5
        return a, b

batch, c, h, w = 3, 5, 7, 9

def get_inputs():
    return [torch.randn(batch, c, h, w)]

def get_init_inputs():
    return []
'''

NOT_CONSECUTIVE = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=[1, 3])

def get_inputs():
    return [torch.randn(2, 3, 4, 5)]

def get_init_inputs():
    return []
'''

# ConvTranspose2d + bias + GELU: a library call and a fused epilogue; ConvTranspose3d alone keeps
# its bias in cuDNN (no kernel follows)
CONV_TRANSPOSE = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return F.gelu(self.up(x)) * 1.5

batch, cin, cout, height, width = 2, 4, 6, 9, 7

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, cout]
'''

CONV_TRANSPOSE_ALONE = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose3d(cin, cout, 3, stride=2)

    def forward(self, x):
        return self.up(x)

batch, cin, cout, size = 2, 3, 4, 5

def get_inputs():
    return [torch.randn(batch, cin, size, size, size)]

def get_init_inputs():
    return [cin, cout]
'''

# name -> (source, shape overrides for the second comparison on the GPU)
CASES = {
    "conv_group_norm": (CONV_GROUP_NORM, {"batch": 2, "height": 10, "width": 16}),
    "gemm_group_norm": (GEMM_GROUP_NORM, {"batch": 9}),
    "instance_norm": (INSTANCE_NORM, {"height": 16, "width": 16}),
    "long_group_norm": (LONG_GROUP_NORM, {"batch": 1, "size": 64}),
    "half_group_norm": (HALF_GROUP_NORM, {"batch": 2, "size": 9}),
    "multi_dim": (MULTI_DIM, {"batch": 2, "h": 4, "w": 16}),
    "conv_transpose": (CONV_TRANSPOSE, {"height": 8, "width": 8}),
    "conv_transpose_alone": (CONV_TRANSPOSE_ALONE, {"size": 4}),
}


def write(tmp_path: Path, text: str, name: str = "problem.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _plan(tmp_path: Path, source: str):
    return plan_builtin(capture(write(tmp_path, source)))


def _techniques(plan) -> list[str]:
    return [s.technique for s in plan.steps]


def test_long_group_norm_rows_fuse_the_conv_bias_and_the_shift(tmp_path):
    plan = _plan(tmp_path, LONG_GROUP_NORM)
    assert _techniques(plan) == ["library_call", "fused_reduction"]
    spec = plan.steps[1].kernel_spec()
    assert [o.op for o in spec.prologue] == ["add"] and [o.op for o in spec.epilogue] == ["relu", "add"]


def test_group_norm_after_a_conv_is_one_reduction_with_the_bias_and_the_tail(tmp_path):
    plan = _plan(tmp_path, CONV_GROUP_NORM)
    assert _techniques(plan) == ["library_call", "fused_reduction"]
    spec = plan.steps[1].kernel_spec()
    assert spec.kind == "group_norm" and spec.groups == 4 and spec.eps == pytest.approx(1e-5)
    assert spec.weight and spec.bias
    # the conv bias (split out of cuDNN) is the prologue; tanh and the bias add the epilogue
    assert [o.op for o in spec.prologue] == ["add"]
    assert [o.op for o in spec.epilogue] == ["tanh", "add"]
    assert "fallback" not in " ".join(plan.notes)


def test_group_norm_of_a_gemm_output_reads_the_gemm_and_fuses_hardtanh(tmp_path):
    plan = _plan(tmp_path, GEMM_GROUP_NORM)
    assert _techniques(plan) == ["gemm_epilogue", "fused_reduction"]
    spec = plan.steps[1].kernel_spec()
    assert spec.kind == "group_norm" and spec.groups == 6
    assert [(o.op, o.attr("min"), o.attr("max")) for o in spec.epilogue] == [("clamp", -2.0, 2.0)]


def test_instance_norm_is_group_norm_with_one_channel_per_group(tmp_path):
    plan = _plan(tmp_path, INSTANCE_NORM)
    assert _techniques(plan) == ["library_call", "fused_reduction"]
    spec = plan.steps[1].kernel_spec()
    assert spec.kind == "group_norm" and spec.groups == 5
    assert spec.weight is None and spec.bias is None
    assert [o.op for o in spec.epilogue] == ["div"]


def test_instance_norm_with_running_statistics_stays_in_pytorch(tmp_path):
    plan = _plan(tmp_path, INSTANCE_NORM_RUNNING)
    fallback = [s for s in plan.steps if s.technique == "pytorch_fallback"]
    assert [s.spec["op"] for s in fallback] == ["aten.instance_norm.default"]
    assert any("running statistics" in n for n in plan.notes)


def test_consecutive_dims_reduce_as_one_and_others_stay_in_pytorch(tmp_path):
    plan = _plan(tmp_path, MULTI_DIM)
    specs = [s.kernel_spec() for s in plan.steps if s.technique == "fused_reduction"]
    assert sorted((s.kind, s.dim, s.dim_count, s.keepdim) for s in specs) == [
        ("mean", 1, 3, False), ("sum", 2, 2, True)]
    mean = next(s for s in specs if s.kind == "mean")
    assert [o.op for o in mean.prologue] == ["relu"]
    plan = _plan(tmp_path, NOT_CONSECUTIVE)
    assert _techniques(plan) == ["pytorch_fallback"]
    assert any("not consecutive" in n for n in plan.notes)


@pytest.mark.parametrize("dims, rank, expected", [
    ([1, 2, 3], 4, (1, 3)), ([-1, -2], 4, (2, 2)), ([0], 1, (0, 1)), ([3, 1], 4, None),
    ([1, 1], 3, None), ([4], 4, None), ([], 2, None), ([-1], 0, (0, 1)), ("1", 2, None)])
def test_reduced_dims(dims, rank, expected):
    assert reduced_dims(dims, rank) == expected


def test_conv_transpose_is_a_library_call_whose_bias_moves_into_the_epilogue(tmp_path):
    plan = _plan(tmp_path, CONV_TRANSPOSE)
    assert _techniques(plan) == ["library_call", "fused_elementwise"]
    conv = plan.steps[0]
    assert conv.spec["op"] == "aten.conv_transpose2d.input"
    assert "aten::cudnn_convolution_transpose" in conv.spec["declare"]
    assert len(conv.inputs) == 2  # x and the weight: the bias is the epilogue's
    assert [o.op for o in plan.steps[1].kernel_spec().ops][:1] == ["add"]
    assert conv.estimated_flops > 0


def test_a_conv_bias_stays_in_cudnn_when_no_kernel_follows(tmp_path):
    plan = _plan(tmp_path, CONV_TRANSPOSE_ALONE)
    assert _techniques(plan) == ["library_call"]
    assert len(plan.steps[0].inputs) == 3  # x, weight, bias: one pass over the output


def _group_norm_spec(**kw) -> ReductionSpec:
    base = dict(name="gn", kind="group_norm",
                inputs=(TensorArg("x", "float32"), TensorArg("w", "float32")), dim=1,
                keepdim=True, out_dtype="float32", weight="w", groups=3)
    base.update(kw)
    return ReductionSpec(**base)


def test_group_norm_spec_survives_json_and_emits_its_view_and_any_layout_row_loads():
    spec = _group_norm_spec(epilogue=(ElementwiseOp("relu", ("acc",), "r"),), epilogue_out="r")
    assert spec_from_json(spec_to_json(spec)) == spec
    source = emit(spec)
    # rows are channel groups; the weight is read per channel inside a row
    assert "outer = x_sizes[0] * 3;" in source.binding
    assert "affine_shape[0] = channels;" in source.binding
    assert "ks_load_row_any<VEC>(" in source.cuda and "= ks_row_base_any(" in source.cuda
    # long rows: the channel-span kernels, planned by the binding
    assert "gn_stats<<<" in source.cuda and "gn_apply<<<" in source.cuda
    assert "plan.span = gn_span;" in source.binding
    # the other kinds keep the one-load row form
    softmax = emit(ReductionSpec("sm", "softmax", (TensorArg("x", "float32"),), -1, False, "float32"))
    assert "ks_load_row_any<VEC>(" not in softmax.cuda and "ks_load_row<VEC>(p" in softmax.cuda


@pytest.mark.parametrize("bad, message", [
    (dict(groups=0), "groups >= 1"),
    (dict(kind="sum", weight=None, dim_count=0), "dim_count"),
    (dict(kind="softmax", weight=None, dim_count=2), "dim_count"),
])
def test_malformed_specs_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        emit(_group_norm_spec(**bad))
