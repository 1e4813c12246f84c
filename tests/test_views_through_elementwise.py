"""Issue 22: elementwise ops move across the reshape between them and a reduction (the
`views_through_elementwise` rewrite), so they fuse as its prologue / epilogue; planned and checked
on the CPU with the kernels interpreted in torch."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.inprocess import generate_builtin
from kernelstitch.agents.planner.dim_groups import dim_groups as _dim_groups

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_coder import interpreted_program  # noqa: E402

HEADER = "import torch\nimport torch.nn as nn\n\n"

# level2/38's shape of code (KernelBench), small: a spatial softmax written with views
SPATIAL_SOFTMAX = HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(3, 8, 3, stride=2, padding=1, output_padding=1)
        self.scale = nn.Parameter(torch.randn(1, 8, 1, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = torch.clamp(x, 0.0, 1.0)
        b, c, d, h, w = x.shape
        x = x.view(b, c, -1)
        x = torch.softmax(x, dim=2)
        x = x.view(b, c, d, h, w)
        return x * self.scale

def get_inputs():
    return [torch.randn(2, 3, 3, 5, 6)]

def get_init_inputs():
    return []
'''

# an operand varying along merged dims cannot follow the reshape: that op stays before it
MIXED = HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth = nn.Parameter(torch.randn(1, 1, 3, 1))
        self.gain = nn.Parameter(torch.randn(4, 1))

    def forward(self, x):
        y = torch.tanh(x) * self.depth
        y = y.reshape(x.shape[0], 4, -1)
        s = y.sum(dim=-1, keepdim=True)
        return s.view(x.shape[0], 4, 1, 1).squeeze(-1) * self.gain

def get_inputs():
    return [torch.randn(5, 4, 3, 7)]

def get_init_inputs():
    return []
'''

# a split: a row reshaped into groups, reduced per group, and the groups' results scaled
SPLIT = HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        g = (x * 2.0).view(x.shape[0], 6, 5)
        m = torch.amax(g, dim=2)
        return torch.sigmoid(m) + 1.0

def get_inputs():
    return [torch.randn(7, 30)]

def get_init_inputs():
    return []
'''


def _generate(tmp_path: Path, text: str):
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(text))
    candidate = generate_builtin(path, "Model", tmp_path / "model_new.py")
    _, reference, new, x = interpreted_program(tmp_path, path, candidate)
    with torch.no_grad():
        torch.testing.assert_close(new(*x), reference(*x), atol=1e-5, rtol=1e-5)
    return candidate


def test_the_spatial_softmax_takes_the_clamp_and_the_scale_into_one_kernel(tmp_path):
    candidate = _generate(tmp_path, SPATIAL_SOFTMAX)
    kernels = [s for s in candidate.plan.steps if s.technique != "library_call"]
    assert [s.technique for s in kernels] == ["fused_reduction"]
    spec = kernels[0].spec
    assert spec["kind"] == "softmax"
    assert [op["op"] for op in spec["prologue"]] == ["add", "clamp"]  # the conv's bias, clamp
    assert [op["op"] for op in spec["epilogue"]] == ["mul"]
    assert any("move after it (its prologue)" in n for n in candidate.plan.notes)
    assert any("move before it (its epilogue)" in n for n in candidate.plan.notes)


def test_an_operand_that_varies_across_merged_dims_keeps_its_op_before_the_reshape(tmp_path):
    candidate = _generate(tmp_path, MIXED)
    reduction = next(s for s in candidate.plan.steps if s.technique == "fused_reduction")
    assert [op["op"] for op in reduction.spec["prologue"]] == []  # tanh * depth stayed before
    assert not any("(its prologue)" in n for n in candidate.plan.notes)


def test_a_split_reshape_moves_both_ways(tmp_path):
    candidate = _generate(tmp_path, SPLIT)
    reduction = next(s for s in candidate.plan.steps if s.technique == "fused_reduction")
    assert [op["op"] for op in reduction.spec["prologue"]] == ["mul"]
    assert len([s for s in candidate.plan.steps if s.technique != "pytorch_fallback"]) == 1


@pytest.mark.parametrize("old,new,groups", [
    ((32, 64, 32, 64, 64), (32, 64, 131072), [([0], [0]), ([1], [1]), ([2, 3, 4], [2])]),
    ((7, 30), (7, 6, 5), [([0], [0]), ([1], [1, 2])]),
    ((4, 6), (6, 4), [([0, 1], [0, 1])]),  # no shorter runs of equal products: one group
])
def test_dim_groups(old, new, groups):
    assert [(list(a), list(b)) for a, b in _dim_groups(old, new)] == groups


def test_dim_groups_refuse_ambiguous_or_mismatched_shapes():
    assert _dim_groups((3, 1, 4), (3, 4)) is None  # a size-1 dim
    assert _dim_groups((3, 4), (5, 2)) is None


# the view's sizes read from the value it reshapes: export records them as that value's sym_size
SIZES_FROM_THE_VALUE = HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        y = torch.relu(x) * 3.0
        z = y.view(y.size(0), y.size(1), -1)
        return torch.softmax(z, dim=-1)

def get_inputs():
    return [torch.randn(4, 6, 5, 7)]

def get_init_inputs():
    return []
'''


def test_a_view_whose_sizes_come_from_the_value_is_correct_either_way(tmp_path):
    candidate = _generate(tmp_path, SIZES_FROM_THE_VALUE)
    # whatever moved, no kernel computes a value only for its sizes: one kernel in all
    assert [s.technique for s in candidate.plan.steps if s.technique != "pytorch_fallback"] \
        == ["fused_reduction"]


def _graph(size_of: str):
    """x -> relu -> view(sym_size(<size_of>, 0), 6, -1) -> softmax, built by hand (export writes
    sizes of the input; another capture could write them of the reshaped value)."""
    from kernelstitch.agents.plan.graph import Graph, Node, NodeRef, Placeholder, TensorMeta

    full = TensorMeta((4, 6, 5, 7), (4, 6, 5, 7), "float32")
    flat = TensorMeta((4, 6, 35), (4, 6, 35), "float32")
    nodes = [Node("x", "placeholder", outputs=(full,), placeholder=Placeholder("input", index=0)),
             Node("y", "aten.relu.default", (NodeRef("x"),), outputs=(full,)),
             Node("n", "aten.sym_size.int", (NodeRef(size_of), 0), outputs=(None,)),
             Node("v", "aten.view.default", (NodeRef("y"), [NodeRef("n"), 6, -1]), outputs=(flat,)),
             Node("s", "aten.softmax.int", (NodeRef("v"), 2), outputs=(flat,))]
    return Graph("Model", "p.py", nodes, [NodeRef("s")])


def test_a_value_the_view_reads_its_sizes_from_stays_before_the_view():
    from kernelstitch.agents.planner.rewrites import _views_through_elementwise

    moved, _, _ = _views_through_elementwise(_graph("x"))
    assert {e.node.name for e in moved} == {"x_as_v", "v"}  # relu re-made after the view
    kept, _, _ = _views_through_elementwise(_graph("y"))
    assert kept == []  # y has two readers (the view, its sym_size): it stays, nothing moves


# A review's cases (2026-11-28): each made the first form of the rewrite crash or compute wrong.
STALE_CACHE = HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth = nn.Parameter(torch.randn(1, 1, 3, 1))

    def forward(self, x):
        a = x * self.depth  # varies inside the merged dims: cannot follow the reshape
        y = a + x
        return y.reshape(x.shape[0], 4, -1).sum(-1)

def get_inputs():
    return [torch.randn(5, 4, 3, 7)]

def get_init_inputs():
    return []
'''

SLICE = HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        y = x[..., :7]  # a non-contiguous view: the original views z, a fresh contiguous value
        z = torch.relu(y) * 2.0 + y
        return torch.softmax(z.view(x.shape[0], 6, -1), dim=-1)

def get_inputs():
    return [torch.randn(3, 6, 5, 9)]

def get_init_inputs():
    return []
'''

LITERAL_BATCH = HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, 6, 1))

    def forward(self, x):
        return (x * self.w).view(4, 6, -1).sum(-1)  # 4: the example batch, not the batch

def get_inputs():
    return [torch.randn(4, 6, 4)]

def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("text", [STALE_CACHE, SLICE], ids=["stale-cache", "slice"])
def test_operands_that_cannot_follow_and_non_contiguous_values_stay_correct(tmp_path, text):
    _generate(tmp_path, text)  # plans, codes and matches the reference (interpreted kernels)


def test_a_literal_size_equal_to_the_example_batch_pins_the_batch_or_is_not_grouped(tmp_path):
    """`view(4, 6, -1)` of a batch whose example is 4: export pins the batch to 4 (the candidate
    takes only that batch, and there the rewrite is exact); where sizes stay symbolic, a group is
    kept only if its sizes multiply alike for any symbol values."""
    from kernelstitch.agents.plan.graph import TensorMeta
    from kernelstitch.agents.planner.dim_groups import symbolic_groups as _symbolic_groups

    candidate = _generate(tmp_path, LITERAL_BATCH)
    assert any("export fixed the batch size" in n for n in candidate.plan.notes)
    swapped = _symbolic_groups(TensorMeta(("s77", 6, 4), (4, 6, 4), "float32"),
                               TensorMeta((4, 6, "s77"), (4, 6, 4), "float32"))
    assert swapped is None  # the examples group [0]-[0], the symbols do not
    merged = _symbolic_groups(
        TensorMeta(("s77", 64, "2*((s53//2))", "2*((s0//2))", "2*((s92//2))"), (32, 64, 32, 64, 64), "float32"),
        TensorMeta(("s77", 64, "8*((s0//2))*((s53//2))*((s92//2))"), (32, 64, 131072), "float32"))
    assert [(list(a), list(b)) for a, b in merged] == [([0], [0]), ([1], [1]), ([2, 3, 4], [2])]
    assert _symbolic_groups(TensorMeta(("Max(1, s0)", 6), (3, 6), "float32"),
                            TensorMeta(("Max(1, s0)", 6), (3, 6), "float32")) is None  # not plain arithmetic
