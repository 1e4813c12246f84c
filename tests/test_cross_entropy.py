"""Issue 22 (losses): cross_entropy with class-index targets read as the rows' logsumexp (a
reduction kernel) and one negative log-likelihood kernel (codegen/nll.py) picking the logit at
each target, so the [N, C] log-probabilities are never stored; weights and label smoothing stay
PyTorch's.  Plans, JSON and emitted sources on the CPU; tests/test_cross_entropy_gpu.py runs
the kernels and modules on a GPU."""

from __future__ import annotations

import pytest
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import NllLossSpec, spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import nll_specs
from test_norms import _HEADER, write

LOSSES = _HEADER + '''
class Model(nn.Module):
    def forward(self, x, t):
        mean = F.cross_entropy(x, t)
        total = F.cross_entropy(x * 2.0, t, reduction="sum", ignore_index=1)
        return mean, total, F.cross_entropy(x, t, reduction="none")

def get_inputs():
    return [torch.randn(37, 11), torch.randint(0, 11, (37,))]
'''


def _nlls(plan) -> list[NllLossSpec]:
    return [s.kernel_spec() for s in plan.steps if (s.spec or {}).get("type") == "nll"]


@pytest.mark.parametrize("spec", nll_specs(), ids=lambda s: s.name)
def test_nll_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


def test_cross_entropy_plans_as_logsumexp_and_nll_kernels(tmp_path):
    plan = plan_builtin(capture(write(tmp_path, LOSSES)))
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    mean, total, rows = _nlls(plan)
    assert (mean.reduction, mean.ignore_index) == ("mean", -100)
    assert (total.reduction, total.ignore_index) == ("sum", 1)
    assert rows.reduction == "none" and rows.target.dtype == "int64"
    kinds = [(s.spec or {}).get("kind") for s in plan.steps if (s.spec or {}).get("type") == "reduction"]
    assert kinds.count("logsumexp") == 3


@pytest.mark.parametrize("call", ["F.cross_entropy(x, t, label_smoothing=0.1)",
                                  "F.cross_entropy(x, t, weight=x.new_ones(11))",
                                  "F.cross_entropy(x, torch.softmax(x, 1))"])
def test_unsupported_cross_entropy_forms_stay_pytorch(tmp_path, call):
    source = LOSSES.replace('return mean, total, F.cross_entropy(x, t, reduction="none")', f"return {call}")
    plan = plan_builtin(capture(write(tmp_path, source)))
    assert not _nlls(plan) and "pytorch_fallback" in [s.technique for s in plan.steps]


def test_nll_kernels_are_emitted():
    mean, total, rows = (emit(s) for s in nll_specs())
    assert "_total<<<1, 1024" in mean.cuda and "true ? sum / count : sum" in mean.cuda
    assert "(int64_t)(3)" in total.cuda and "false ? sum / count : sum" in total.cuda
    assert "std::vector<int64_t>{N}" in rows.binding and "at::kBFloat16" in rows.binding
    assert "at::kLong" in rows.binding


def test_kernelbench_cross_entropy_plans_without_fallback():
    from test_norms_gpu import KERNELBENCH

    if KERNELBENCH is None:
        pytest.skip("no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
    plan = plan_builtin(capture(KERNELBENCH / "level1" / "95_CrossEntropyLoss.py"))
    assert [s.technique for s in plan.steps] == ["fused_reduction", "fused_reduction"]
    assert _nlls(plan)[0].reduction == "mean"


def test_cross_entropy_program_matches_the_module_with_interpreted_kernels(tmp_path):
    """The plan's wiring on the CPU (which logits, targets and logsumexp each kernel reads, the
    ignored class): every kernel replaced by a torch reading of its spec (tests/test_coder.py)."""
    import torch
    from test_coder import interpreted_problem

    _, reference, new, inputs = interpreted_problem(tmp_path, LOSSES)
    with torch.no_grad():
        for got, want in zip(new(*inputs), reference(*inputs)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
