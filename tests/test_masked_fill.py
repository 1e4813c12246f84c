"""Issue 22: `masked_fill` as an elementwise select, and the causal-mask pattern
`x.masked_fill(m == 0, v)` (`m != 0`) read as one select on m itself, so the bool mask is never
built in PyTorch (level3/50's `self.bias[:, :, :T, :T] == 0`).  Plans on the CPU and the program
run with interpreted kernels against the module, NaN and infinity in m included."""

from __future__ import annotations

from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_norms import _HEADER, write

MASKS = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))

    def forward(self, x, m, flags):
        causal = torch.relu(x * 0.5).masked_fill(self.bias[:, :, :8, :8] == 0, float("-inf"))
        kept = x.masked_fill(m != 0, 2.5)
        return causal, kept, x.masked_fill(flags, -1.0)

def get_inputs():
    m = torch.randn(2, 3, 8, 8)
    m[0, 0, 0, :3] = torch.tensor([0.0, float("nan"), float("inf")])
    return [torch.randn(2, 3, 8, 8), m, torch.rand(2, 3, 8, 8) > 0.5]
'''


def test_masked_fills_plan_as_one_elementwise_select_without_a_bool_mask(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, MASKS)))
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    ops = [plan.graph.node(n).op for s in plan.steps for n in s.nodes]
    assert "aten.eq.Scalar" not in ops and "aten.ne.Scalar" not in ops
    assert ops.count("kernelstitch.where_nonzero") == 2 and "aten.masked_fill.Scalar" in ops
    assert any("read as one select on m" in n for n in plan.notes)
    wheres = [o for s in plan.steps if (s.spec or {}).get("type") == "elementwise"
              for o in s.spec["ops"] if o["op"] == "where"]
    assert len(wheres) == 3


def test_masked_fill_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """NaN in m is not 0 (kept, as torch's eq is false for it), infinity neither, 0 is filled."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, MASKS)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
