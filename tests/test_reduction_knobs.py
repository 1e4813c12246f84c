"""Reduction knobs: the plan carries them, the coder honours them, the search's profile picks
where to vary them (CPU: plans, emitted source, synthetic traces)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("torch")

from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.plan import Plan, PlanError
from kernelstitch.agents.plan.kernel_spec import ReductionKnobs
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.search import hot_reductions
from kernelstitch.agents.verifier.trace_summary import kernel_durations

SOFTMAX = Path(__file__).resolve().parents[1] / "examples" / "softmax_dim1_3d.py"


@pytest.fixture(scope="module")
def plan():
    return plan_builtin(capture(SOFTMAX))


def with_knobs(plan: Plan, knobs: ReductionKnobs | None) -> Plan:
    return replace(plan, steps=[replace(s, reduction_knobs=knobs) for s in plan.steps])


def kernel_text(plan: Plan, tmp_path: Path) -> str:
    return code_builtin(plan, SOFTMAX, tmp_path / "model_new.py").kernel_for_step("s1").cuda


def test_knobs_round_trip_through_the_plan_json(plan):
    knobbed = with_knobs(plan, ReductionKnobs(cluster=False))
    again = Plan.from_json(knobbed.to_json())
    assert again.steps[0].reduction_knobs == ReductionKnobs(cluster=False)
    assert Plan.from_json(plan.to_json()).steps[0].reduction_knobs is None


def test_malformed_knobs_are_a_plan_error(plan):
    data = with_knobs(plan, ReductionKnobs()).to_json()
    data["steps"][0]["reduction_knobs"] = {"cluster": "no"}
    with pytest.raises(PlanError, match="reduction_knobs"):
        Plan.from_json(data)
    data["steps"][0]["reduction_knobs"] = {"threads": 7}
    with pytest.raises(PlanError, match="reduction_knobs"):
        Plan.from_json(data)


def test_the_coder_honours_the_knobs_and_the_defaults_change_nothing(plan, tmp_path):
    default = kernel_text(plan, tmp_path)
    assert kernel_text(with_knobs(plan, ReductionKnobs()), tmp_path) == default
    no_cluster = kernel_text(with_knobs(plan, ReductionKnobs(cluster=False)), tmp_path)
    assert no_cluster != default and "ks_s1_softmax_cluster" not in no_cluster
    fast = kernel_text(with_knobs(plan, ReductionKnobs(fast_exp=True)), tmp_path)
    assert fast.count("__expf(") > default.count("__expf(")  # the row kernels' sums


def test_kernel_durations_sum_per_kernel_name():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "ks_s1_softmax_cluster", "ts": 0, "dur": 300.0},
        {"ph": "X", "cat": "kernel", "name": "ks_s1_softmax_cluster", "ts": 9, "dur": 200.0},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 5, "dur": 500.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5, "dur": 900.0},
    ]}
    assert kernel_durations(trace) == {"ks_s1_softmax_cluster": 0.5, "gemm": 0.5}


def test_hot_reductions_are_the_steps_whose_kernels_dominate(plan):
    kernels = {"void ks_s1_softmax_cluster<4>()": 0.3, "cutlass_gemm": 0.7}
    assert hot_reductions(plan, kernels) == {"s1": (0.3, ["void ks_s1_softmax_cluster<4>()"])}
    assert hot_reductions(plan, kernels, share=0.5) == {}
    assert hot_reductions(plan, {}) == {}


def test_a_hot_scan_is_not_a_hot_reduction_and_gets_no_knob_variant(tmp_path):
    """A scan is a fused_reduction step too, and its `_rows` kernel matches the row family's
    ending, but the knobs are the reduction emitter's: no round-2 variant for it."""
    from kernelstitch.agents.planner.variants import PlanVariant, knob_variants
    from test_norms import write
    from test_scan import SCANS

    scans = plan_builtin(capture(write(tmp_path, SCANS)))
    step = scans.steps[0]
    assert step.technique == "fused_reduction" and step.spec["type"] == "scan"
    kernel = f"void {step.spec['name']}_rows<>()"
    assert hot_reductions(scans, {kernel: 1.0}) == {}
    assert knob_variants(PlanVariant("default", "", scans), {step.id: [kernel]}) == []


def test_group_norm_apply_loads_knob_changes_only_its_apply_and_is_a_round_two_variant(tmp_path):
    """batched_loads=False: group_norm's channels-last apply loads slot by slot (the form before
    the batched loads); the knob alters nothing else of the kernel text, and a profile where that
    apply ran hot proposes it as the round-2 variant `slotloads`."""
    from kernelstitch.agents.planner.variants import PlanVariant, knob_variants
    from test_norms import CONV_GROUP_NORM, write

    path = write(tmp_path, CONV_GROUP_NORM)
    gn_plan = plan_builtin(capture(path))
    step = next(s for s in gn_plan.steps if (s.spec or {}).get("kind") == "group_norm")

    def text(knobs: ReductionKnobs | None) -> str:
        plan = replace(gn_plan, steps=[replace(s, reduction_knobs=knobs) if s is step else s for s in gn_plan.steps])
        return code_builtin(plan, path, tmp_path / "model_new.py").kernel_for_step(step.id).cuda

    default, slot = text(None), text(ReductionKnobs(batched_loads=False))
    assert text(ReductionKnobs()) == default and "constexpr bool BATCHED = 1;" in default
    assert slot == default.replace("constexpr bool BATCHED = 1;", "constexpr bool BATCHED = 0;")
    kernel = f"void {step.spec['name']}_gn_nhwc_apply<4, false, 1>()"
    variants = knob_variants(PlanVariant("default", "", gn_plan), {step.id: [kernel]})
    assert [v.name for v in variants] == ["slotloads"]
    assert [s.reduction_knobs for s in variants[0].plan.steps if s.id == step.id] == [ReductionKnobs(batched_loads=False)]


def test_a_knob_flip_keeps_the_steps_other_knobs(plan):
    """A round-2 alternative flips its own knob on top of the step's knobs: a step already on
    __expf keeps it when the cluster alternative applies."""
    from kernelstitch.agents.planner.variants import PlanVariant, knob_variants

    step = plan.steps[0]
    fast = with_knobs(plan, ReductionKnobs(fast_exp=True))
    kernel = f"void {step.spec['name']}_cluster<4>()"
    variants = knob_variants(PlanVariant("fastexp", "", fast), {step.id: [kernel]})
    assert [v.name for v in variants] == ["fastexp-nocluster"]
    assert variants[0].plan.steps[0].reduction_knobs == ReductionKnobs(fast_exp=True, cluster=False)
