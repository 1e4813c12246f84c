"""Issue 22 (exact rewrites): a pool of a pool whose windows tile their inputs is one pool of the
composed window (rewrites._stacked_pools; level2/6's two 2x2x2 max pools, 72's two average pools,
78's 2 then 3).  The identity itself over odd sizes, the plans, the near misses that keep two
pools, and the program with interpreted kernels on the CPU."""

from __future__ import annotations

import pytest
import torch
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_norms import _HEADER, write

F = torch.nn.functional

STACKED = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 4, kernel_size=3)
        self.pool1 = FIRST
        self.pool2 = SECOND

    def forward(self, x):
        return self.pool2(self.pool1(torch.softmax(self.conv(x), dim=1)))

def get_inputs():
    return [torch.randn(2, 3, 17, 15, 22)]
'''
MERGED = "pool(s) of a pool read as one pool"


def _source(first="nn.MaxPool3d(2)", second="nn.MaxPool3d(2)") -> str:
    return STACKED.replace("FIRST", first).replace("SECOND", second)


def _pool_windows(plan) -> list[tuple]:
    return [tuple(s.spec["kernel"]) for s in plan.steps if s.spec.get("type") == "pool"]


@pytest.mark.parametrize("size", [(9, 13, 20), (8, 8, 8), (23, 6, 11)])
@pytest.mark.parametrize("k1, k2", [(2, 2), (2, 3), (3, 2)])
def test_the_identity_over_sizes_that_do_not_divide(size, k1, k2):
    """The proof obligation, checked: max of maxes bitwise, average of averages to rounding, and
    the output sizes agree (floor(floor(n / k1) / k2) == floor(n / (k1 * k2)))."""
    x = torch.randn(2, 3, *size, dtype=torch.float64)
    assert torch.equal(F.max_pool3d(F.max_pool3d(x, k1), k2), F.max_pool3d(x, k1 * k2))
    torch.testing.assert_close(F.avg_pool3d(F.avg_pool3d(x, k1), k2), F.avg_pool3d(x, k1 * k2))


@pytest.mark.parametrize("first, second, window", [
    ("nn.MaxPool3d(2)", "nn.MaxPool3d(2)", (4, 4, 4)),  # level2/6
    ("nn.AvgPool3d(kernel_size=2)", "nn.AvgPool3d(kernel_size=2)", (4, 4, 4)),  # level2/72
    ("nn.MaxPool3d(kernel_size=2)", "nn.MaxPool3d(kernel_size=3)", (6, 6, 6)),  # level2/78
    ("nn.MaxPool3d((1, 2, 2))", "nn.MaxPool3d((2, 1, 3), stride=(2, 1, 3))", (2, 2, 6)),
])
def test_tiling_pools_plan_as_one_pool_of_the_composed_window(tmp_path, first, second, window):
    plan = plan_builtin(capture(write(tmp_path, _source(first, second))))
    assert _pool_windows(plan) == [window]
    assert any(MERGED in n for n in plan.notes)


@pytest.mark.parametrize("first, second", [
    ("nn.MaxPool3d(2)", "nn.AvgPool3d(2)"),  # different kinds
    ("nn.MaxPool3d(2, stride=1)", "nn.MaxPool3d(2)"),  # overlapping windows
    ("nn.MaxPool3d(2, padding=1)", "nn.MaxPool3d(2)"),
    ("nn.MaxPool3d(2)", "nn.MaxPool3d(2, ceil_mode=True)"),  # a partial last window
    ("nn.MaxPool3d(2, dilation=2)", "nn.MaxPool3d(2)"),
    ("nn.AvgPool3d(2)", "nn.AvgPool3d(2, divisor_override=3)"),
])
def test_near_misses_keep_two_pools(tmp_path, first, second):
    plan = plan_builtin(capture(write(tmp_path, _source(first, second))))
    assert len(_pool_windows(plan)) == 2
    assert not any(MERGED in n for n in plan.notes)


def test_a_first_pool_read_elsewhere_is_kept(tmp_path):
    source = _source().replace("return self.pool2(self.pool1(torch.softmax(self.conv(x), dim=1)))",
                               "p = self.pool1(torch.softmax(self.conv(x), dim=1))\n        return self.pool2(p), p")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert sorted(_pool_windows(plan)) == [(2, 2, 2), (2, 2, 2)]
    assert not any(MERGED in n for n in plan.notes)


def test_three_pools_merge_the_first_two(tmp_path):
    """A chain of three: one pass merges the first two (the third reads the merged pool)."""
    source = _source().replace("self.pool2(self.pool1(", "self.pool2(self.pool2(self.pool1(").replace(
        "dim=1)))", "dim=1))))").replace("torch.randn(2, 3, 17, 15, 22)", "torch.randn(2, 3, 19, 21, 26)")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert sorted(_pool_windows(plan)) == [(2, 2, 2), (4, 4, 4)]


@pytest.mark.parametrize("first, second", [
    ("nn.MaxPool3d(2)", "nn.MaxPool3d(2)"),
    ("nn.AvgPool3d(kernel_size=2)", "nn.AvgPool3d(kernel_size=2)"),
    ("nn.MaxPool3d(kernel_size=2)", "nn.MaxPool3d(kernel_size=3)"),
])
def test_program_matches_the_module_with_interpreted_kernels(tmp_path, first, second):
    from test_coder import interpreted_problem

    candidate, reference, new, inputs = interpreted_problem(tmp_path, _source(first, second))
    assert any(MERGED in n for n in candidate.plan.notes)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-4, atol=1e-5)


INTEGER_POOLS = _HEADER + '''
class Model(nn.Module):
    def forward(self, x):
        return F.POOL(F.POOL(x, 2), 2)

def get_inputs():
    return [torch.randint(0, 3, (2, 3, 16, 16))]
'''


@pytest.mark.parametrize("pool, merged", [("avg_pool2d", False), ("max_pool2d", True)])
def test_integer_average_pools_stay_two_and_integer_max_pools_merge(tmp_path, pool, merged):
    """An integer average truncates after each pool (quarters summing to 7, 7, 7 and 3 give
    0 through two 2x2 pools, 1 through one 4x4), so it is not composed; an integer max is."""
    x = torch.tensor([[[[2, 2, 2, 2], [2, 1, 2, 1], [2, 2, 0, 1], [1, 2, 1, 1]]]])
    assert not torch.equal(F.avg_pool2d(F.avg_pool2d(x, 2), 2), F.avg_pool2d(x, 4))
    plan = plan_builtin(capture(write(tmp_path, INTEGER_POOLS.replace("POOL", pool))))
    assert any(MERGED in n for n in plan.notes) == merged
