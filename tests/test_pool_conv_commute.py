"""Issue 22 (exact rewrites): an average pool after a 1x1 convolution runs before it
(rewrites._pool_before_pointwise_conv), the conv on the pooled pixels.  Plans and the program
with interpreted kernels on the CPU; the near misses (a 3x3 conv, a max pool, a pool that does not
shrink, padded zeros counted under a conv bias) keep the order."""

from __future__ import annotations

import pytest
import torch
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_norms import _HEADER, write

TRANSITION = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 6, kernel_size=KERNEL, bias=BIAS)
        self.pool = POOL

    def forward(self, x):
        return self.pool(self.conv(torch.relu(self.bn(x))))

def get_inputs():
    return [torch.randn(3, 8, 12, 10)]
'''


def _source(kernel=1, bias=False, pool="nn.AvgPool2d(kernel_size=2, stride=2)") -> str:
    return TRANSITION.replace("KERNEL", str(kernel)).replace("BIAS", str(bias)).replace("POOL", pool)


def _ops(plan) -> list[str]:
    return [plan.graph.node(n).op for s in plan.steps for n in s.nodes]


@pytest.mark.parametrize("bias, pool", [
    (False, "nn.AvgPool2d(kernel_size=2, stride=2)"),
    (True, "nn.AvgPool2d(kernel_size=2, stride=2)"),  # the bias survives an average
    (True, "nn.AvgPool2d(kernel_size=3, stride=2, padding=1, count_include_pad=False)"),
    (False, "nn.AvgPool2d(kernel_size=3, stride=2, padding=1)"),  # padded zeros: conv(0) = 0 without bias
    (True, "nn.AdaptiveAvgPool2d((3, 2))"),
])
def test_average_pool_moves_before_a_pointwise_conv(tmp_path, bias, pool):
    plan = plan_builtin(capture(write(tmp_path, _source(bias=bias, pool=pool))))
    ops = _ops(plan)
    assert ops.index("aten.conv2d.default") > max(i for i, op in enumerate(ops) if "pool" in op)
    assert any("moved before it" in n for n in plan.notes)


@pytest.mark.parametrize("kernel, bias, pool", [
    (3, False, "nn.AvgPool2d(kernel_size=2, stride=2)"),  # a 3x3 conv mixes pixels
    (1, False, "nn.MaxPool2d(kernel_size=2, stride=2)"),  # max is not linear
    (1, False, "nn.AvgPool2d(kernel_size=3, stride=1, padding=1)"),  # does not shrink: no gain
    (1, True, "nn.AvgPool2d(kernel_size=3, stride=2, padding=1)"),  # counted padded zeros would be b
])
def test_near_misses_keep_the_conv_first(tmp_path, kernel, bias, pool):
    plan = plan_builtin(capture(write(tmp_path, _source(kernel, bias, pool))))
    assert not any("moved before it" in n for n in plan.notes)


def test_an_unbatched_conv_keeps_its_order(tmp_path):
    """[C, H, W] input: the rewrite's [N, C, *spatial] bookkeeping does not apply."""
    source = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 6, kernel_size=1)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(self.conv(x))

def get_inputs():
    return [torch.randn(8, 12, 10)]
'''
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert not any("moved before it" in n for n in plan.notes)


@pytest.mark.parametrize("bias, pool", [
    (True, "nn.AvgPool2d(kernel_size=2, stride=2)"),
    (False, "nn.AvgPool2d(kernel_size=3, stride=2, padding=1)"),
    (True, "nn.AdaptiveAvgPool2d((3, 2))"),
])
def test_program_matches_the_module_with_interpreted_kernels(tmp_path, bias, pool):
    from test_coder import interpreted_problem

    candidate, reference, new, inputs = interpreted_problem(tmp_path, _source(bias=bias, pool=pool))
    assert any("moved before it" in n for n in candidate.plan.notes)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-4, atol=1e-5)
