"""Issue 22 (scans): torch.cumsum / torch.cumprod planned as scan kernels with the elementwise
ops before them as a prologue, `x.flip(d).cumsum(d).flip(d)` read as one scan from the end, and
the scan spec's JSON.  Plans and emitted sources on the CPU; tests/test_scan_gpu.py runs the
kernels and these modules on a GPU against PyTorch."""

from __future__ import annotations

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import ScanSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import scan_specs
from test_norms import _HEADER, write

SCANS = _HEADER + '''
class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, y):
        forward_sum = torch.cumsum(torch.relu(x) * y, dim=self.dim)
        backward = torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)
        return forward_sum, backward, torch.cumprod(x, dim=self.dim)

def get_inputs():
    return [torch.randn(8, 33, 5), torch.randn(33, 1)]

def get_init_inputs():
    return [1]
'''


def _scans(plan) -> list[ScanSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "scan"]


@pytest.mark.parametrize("spec", scan_specs(), ids=lambda s: s.name)
def test_scan_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


def test_scans_plan_with_their_prologue_and_the_reversed_chain_is_one_scan(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, SCANS)))
    assert [s.technique for s in plan.steps] == ["fused_reduction"] * 3
    forward, backward, product = _scans(plan)
    assert (forward.kind, forward.dim, forward.reverse) == ("sum", 1, False)
    assert [op.op for op in forward.prologue] == ["relu", "mul"] and len(forward.inputs) == 2
    assert (backward.kind, backward.reverse, backward.prologue) == ("sum", True, ())
    assert (product.kind, product.reverse) == ("prod", False)
    assert any("flip / cumulative scan / flip" in n for n in plan.notes)
    ops = [plan.graph.node(n).op for s in plan.steps for n in s.nodes]
    assert "aten.flip.default" not in ops and "kernelstitch.cumsum_reverse" in ops  # no flipped copy


def test_a_flip_read_elsewhere_keeps_the_chain(tmp_path):
    source = SCANS.replace("return forward_sum, backward, torch.cumprod(x, dim=self.dim)",
                           "return forward_sum, backward, x.flip(self.dim) * 2")
    source = source.replace("torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)",
                            "torch.cumsum(x.flip(self.dim), dim=self.dim).flip(0)")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert not any(s.reverse for s in _scans(plan))  # flips over another dim: not a reverse scan


def test_a_bool_mask_is_a_prologue_operand_of_a_scan_but_not_of_a_reduction(tmp_path):
    """`x * mask` (level1/93): the scan kernel reads the bool mask as 0 / 1; a reduction's
    kernels take float operands only, so there the multiply stays its own elementwise kernel."""
    source = _HEADER + '''
class Model(nn.Module):
    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=1), (x * mask).sum(dim=1)

def get_inputs():
    return [torch.randn(4, 50), torch.rand(4, 50) > 0.5]
'''
    plan = plan_builtin(capture(write(tmp_path, source)))
    (scan,) = _scans(plan)
    assert [t.dtype for t in scan.inputs] == ["float32", "bool"] and [o.op for o in scan.prologue] == ["mul"]
    reductions = [s for s in plan.steps if (s.spec or {}).get("type") == "reduction"]
    assert reductions and not reductions[0].spec["prologue"]
    masks = [s for s in plan.steps if (s.spec or {}).get("type") == "elementwise"]
    assert masks and "bool" in [t["dtype"] for t in masks[0].spec["inputs"]]


def test_scan_kernels_and_program_are_emitted(tmp_path):
    path = write(tmp_path, SCANS)
    candidate = code_builtin(plan_builtin(capture(path)), path, tmp_path / "model_new.py")
    compile(candidate.source, "model_new.py", "exec")
    cuda = "\n".join(k.cuda for k in candidate.kernels)
    assert cuda.count("_rows(") >= 3 and "R - 1 - k" in cuda
    reverse = emit(scan_specs()[2])
    assert "true ? R - 1 - k : k" in reverse.cuda and "a * b" in reverse.cuda and "1.0f" in reverse.cuda
    assert "int64_t dim = 0;" in reverse.binding


@pytest.mark.parametrize("problem, reverse", [("89_cumsum", False), ("90_cumprod", False),
                                              ("91_cumsum_reverse", True), ("92_cumsum_exclusive", False),
                                              ("93_masked_cumsum", False)])
def test_kernelbench_scans_plan_without_fallback(problem, reverse):
    from test_norms_gpu import KERNELBENCH

    if KERNELBENCH is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    plan = plan_builtin(capture(KERNELBENCH / "level1" / f"{problem}.py"))
    assert [s.technique for s in plan.steps] == ["fused_reduction"]
    assert _scans(plan)[0].reverse is reverse
    assert _scans(plan)[0].exclusive is (problem == "92_cumsum_exclusive")  # one scan, no cat


EXCLUSIVE = _HEADER + '''
class Model(nn.Module):
    def forward(self, x, y):
        n = x.size(1)
        sums = torch.cumsum(x.narrow(1, 0, n - 1), dim=1)
        sums = torch.cat((torch.zeros_like(x[:, :1]), sums), dim=1)
        products = torch.cumprod(y[:-1], dim=0)
        products = torch.cat((torch.ones_like(y[:1]), products), dim=0)
        return sums, products, SECOND

def get_inputs():
    return [torch.randn(6, 37), torch.rand(9, 4) + 0.5]
'''


def test_identity_then_scan_of_all_but_the_last_is_one_exclusive_scan(tmp_path):
    source = EXCLUSIVE.replace("SECOND", "x * 2")
    plan = plan_builtin(capture(write(tmp_path, source)))
    scans = _scans(plan)
    assert [(s.kind, s.dim, s.exclusive, s.reverse) for s in scans] == [("sum", 1, True, False), ("prod", 0, True, False)]
    ops = [plan.graph.node(n).op for s in plan.steps for n in s.nodes]
    assert "aten.cat.default" not in ops and "aten.narrow.default" not in ops
    assert any("exclusive scan" in n for n in plan.notes)


@pytest.mark.parametrize("change", [
    ("torch.zeros_like(x[:, :1])", "torch.ones_like(x[:, :1])"),  # not the sum's identity
    ("x.narrow(1, 0, n - 1)", "x.narrow(1, 1, n - 1)"),  # all but the first: not exclusive
    ("sums), dim=1)", "sums), dim=1) * sums.sum()"),  # the scan is read elsewhere too
])
def test_near_misses_keep_the_scan_and_the_cat(tmp_path, change):
    source = EXCLUSIVE.replace(*change).replace("SECOND", "x * 2")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert not any(s.exclusive for s in _scans(plan) if s.kind == "sum")


def test_exclusive_scan_program_matches_the_module_with_interpreted_kernels(tmp_path):
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, EXCLUSIVE.replace("SECOND", "x * 2"))
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_scan_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The plan's wiring on the CPU (prologue operands, reverse, which value each scan reads):
    every kernel replaced by a torch reading of its spec (tests/test_coder.py)."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, SCANS)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
