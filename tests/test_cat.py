"""Issue 22 (cat): torch.cat planned as one concatenation kernel that computes each input's
elementwise producer chain where it is stored (a conv's bias and ReLU before a SqueezeNet or
Inception cat), and the spec's JSON and validation.  Plans and emitted sources on the CPU;
tests/test_cat_gpu.py runs the kernels and these modules on a GPU against PyTorch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import CatSegment, CatSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import cat_specs
from test_norms import _HEADER, write

# SqueezeNet's fire module, and a third segment whose producer is read elsewhere too
FIRE = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1 = nn.Conv2d(squeeze, expand, 1)
        self.e3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        x = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x)), x * 2], 1)

batch, cin, squeeze, expand, height, width = 2, 8, 4, 6, 9, 11

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, squeeze, expand]
'''


def _cats(plan) -> list[CatSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "cat"]


@pytest.mark.parametrize("spec", cat_specs(), ids=lambda s: s.name)
def test_cat_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


def test_every_input_belongs_to_one_segment():
    spec = cat_specs()[0]
    with pytest.raises(ValueError, match="read by segments 0 and 1"):
        emit(replace(spec, segments=(spec.segments[0], CatSegment((1, 2), (), "y"), spec.segments[2])))
    with pytest.raises(ValueError, match="read by no segment"):
        emit(replace(spec, segments=spec.segments[:2]))


def test_fire_module_cat_computes_the_bias_and_relu_of_its_inputs(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, FIRE)))
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    (cat,) = _cats(plan)
    assert cat.dim == 1 and len(cat.segments) == 3
    fused, other_fused, shared = cat.segments
    assert [o.op for o in fused.ops] == ["add", "relu"] and [o.op for o in other_fused.ops] == ["add", "relu"]
    assert shared.ops == ()  # x * 2 shares its kernel with the relu the convolutions read
    step = next(s for s in plan.steps if (s.spec or {}).get("type") == "cat")
    assert step.technique == "fused_elementwise" and "2 computed where they are stored" in step.description


def test_a_tensor_listed_twice_stays_a_pytorch_cat(tmp_path):
    source = FIRE.replace("return torch.cat([torch.relu(self.e1(x)), torch.relu(self.e3(x)), x * 2], 1)",
                          "return torch.cat([x, x], 1)")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert not _cats(plan) and "pytorch_fallback" in [s.technique for s in plan.steps]


def test_cat_program_is_emitted(tmp_path):
    path = write(tmp_path, FIRE)
    candidate = code_builtin(plan_builtin(capture(path)), path, tmp_path / "model_new.py")
    compile(candidate.source, "model_new.py", "exec")
    cat = next(k for k in candidate.kernels if k.function.endswith("_cat"))
    assert "_s0(" in cat.cuda and "case 2:" in cat.cuda and "g.off[mid] <= d" in cat.cuda and "ks_broadcast_shape({in_0, in_1})" in cat.binding


# (level1/92's cat of zeros and a cumsum is one exclusive scan now: tests/test_scan.py)
@pytest.mark.parametrize("problem", ["level3/17_SqueezeNetFireModule", "level3/6_GoogleNetInceptionModule"])
def test_kernelbench_cats_plan_without_fallback(problem):
    from test_norms_gpu import KERNELBENCH

    if KERNELBENCH is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    plan = plan_builtin(capture(KERNELBENCH / f"{problem}.py"))
    assert _cats(plan) and "pytorch_fallback" not in [s.technique for s in plan.steps]


def test_pytorch_cat_is_a_measured_variant(tmp_path):
    """The kernel is timed against PyTorch's cat (its batched copy), not trusted."""
    from kernelstitch.agents.planner.variants import propose_variants

    graph = capture(write(tmp_path, FIRE))
    variants = {v.name: v.plan for v in propose_variants(graph, limit=8)}
    assert _cats(variants["default"]) and not _cats(variants["cat-in-pytorch"])
    assert "pytorch_fallback" in [s.technique for s in variants["cat-in-pytorch"].steps]


def test_cat_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The segments' wiring on the CPU: every kernel replaced by a torch reading of its spec."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, FIRE)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)


# A zero column before a computed block (not a scan of all but the last value: that is one
# exclusive scan, rewrites._exclusive_scan).
PADDED = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        rest = torch.relu(x.narrow(dim=1, start=0, length=x.size(1) - 1))
        return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), rest), dim=1), torch.full_like(x, 2.5)

def get_inputs():
    x = torch.randn(4, 10)
    x[0, 0] = float("nan")  # a fill ignores the values it takes its shape from
    return [x]
'''


def test_fills_are_elementwise_and_computed_inside_a_cat(tmp_path):
    """`zeros_like` is `where(x, 0, 0)` (0 for any x, NaN too), computed inside the cat's first
    segment; `full_like` likewise."""
    import torch
    from test_coder import interpreted_problem

    path = write(tmp_path, PADDED)
    plan = plan_builtin(capture(path))
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    (cat,) = _cats(plan)
    assert [(o.op, o.args[1:]) for o in cat.segments[0].ops] == [("where", (0.0, 0.0))]
    _, reference, new, inputs = interpreted_problem(tmp_path, PADDED)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_segments_reading_one_tensor_keep_their_producers_apart(tmp_path):
    """Swin V2 concatenates two chains of one tensor: a tensor read by two segments is not a
    cat the kernel takes, so the second chain stays its own kernel and the cat reads its result."""
    source = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        return torch.cat([torch.relu(x), torch.sigmoid(x) * 2, x + 1], dim=1)

def get_inputs():
    return [torch.randn(4, 6)]
'''
    plan = plan_builtin(capture(write(tmp_path, source)))
    (cat,) = [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "cat"]
    names = [t.name for t in cat.inputs]
    assert len(names) == len(set(names)) and names.count("x") == 1
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]


def test_the_transposing_kernel_keeps_fewer_values_in_registers_for_many_operands():
    """Each operand's PER = 4 * TILES values a thread sit in registers: 4 tiles where no segment
    reads more than 2 operands, 2 where one reads a fused batch_norm's 5."""
    by_name = {spec.name: emit(spec) for spec in cat_specs()}
    assert "_tr_kernel<4><<<" in by_name["cat_fused_tr"].cuda
    assert "_tr_kernel<2><<<" in by_name["cat_bn_tr"].cuda
