"""Verifier on a real GPU: every cheat rejected for the right reason, honest candidates accepted.

Each cheat lists the codes its static rule gives (if any) and the codes the dynamic checks must
find on their own, so a cheat is caught twice where both apply.  Set KS_VERDICT_DIR to keep every
verdict as JSON (used when running through the device tool).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier import Verdict, VerifyOptions, verify

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

CANDIDATES = Path(__file__).parent / "candidates"
REF = CANDIDATES / "ref_scale_relu.py"
QUICK = VerifyOptions(seeds=2, shape_variants=0, timing=False, compare_compile=False,
                      timeout_s=300)
WITH_SHAPES = VerifyOptions(seeds=2, shape_variants=2, timing=False, compare_compile=False,
                            timeout_s=300)


def _verify(name: str, options: VerifyOptions, reference: Path = REF) -> Verdict:
    verdict = verify(reference, CANDIDATES / name, options=options)
    out = os.environ.get("KS_VERDICT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{Path(name).stem}.json").write_text(json.dumps(verdict.to_json(),
                                                                      indent=1))
    print(name, verdict.status, verdict.codes())
    return verdict


def test_honest_candidate_is_accepted_with_timings():
    options = VerifyOptions(seeds=3, shape_variants=2, timing=True, compare_compile=True,
                            timing_budget_s=0.5, timeout_s=400)
    verdict = _verify("honest_scale_relu.py", options)
    assert verdict.status == "accepted", verdict.reasons
    assert verdict.exit_code() == 0
    assert len(verdict.seeds) == 3 and len(verdict.shapes) == 5  # 3 seeds + 2 other shapes
    assert [[4096, 4096]] in verdict.shapes and any(s != [[4096, 4096]] for s in verdict.shapes)
    t = verdict.timings
    assert t is not None and t.candidate_ms.n >= 15 and t.eager_ms.n >= 30
    assert t.candidate_ms.median > 0 and t.speedup_vs_eager > 0
    assert any(c.name.startswith("profile:") and c.passed for c in verdict.checks)
    # the candidate's own kernel and its GPU time a forward (the bench's bandwidth fractions)
    assert verdict.own_kernel_us and all(us > 0 for us in verdict.own_kernel_us.values())
    assert any("scale_relu" in name for name in verdict.own_kernel_us), verdict.own_kernel_us


def test_honest_joined_side_stream_is_accepted():
    verdict = _verify("honest_joined_stream.py", QUICK)
    assert verdict.status == "accepted", verdict.reasons


CHEATS = [
    # file, codes from the static rules, codes the dynamic checks must find, options
    ("cheat_copy_pytorch.py", {"reuses_reference_op"}, {"no_custom_kernel"}, QUICK),
    ("cheat_cached_output.py", {"cached_output"},
     {"wrong_output", "output_reused_across_calls"}, QUICK),
    ("cheat_stale_memory.py", set(), {"unwritten_output", "no_custom_kernel"}, QUICK),
    ("cheat_side_stream.py", set(), {"side_stream_work"},
     VerifyOptions(seeds=2, shape_variants=0, timing=True, compare_compile=False,
                   timing_budget_s=0.3, timeout_s=300)),
    # without timing, the per-check snapshot alone must catch it (the occupier makes the side
    # kernel wait for SMs, so it cannot finish during the host's overhead)
    ("cheat_side_stream.py", set(), {"side_stream_work"}, QUICK),
    ("cheat_mutates_input.py", set(), {"mutates_input", "output_aliases_input"}, QUICK),
    ("cheat_shape_specialised.py", set(), {"shape_specialised"}, WITH_SHAPES),
    ("cheat_timer_patch.py", {"timer_tampering"}, {"timer_tampering"}, QUICK),
    ("cheat_partial_output.py", set(), {"unwritten_output"}, QUICK),
    ("cheat_silent_fallback.py", {"silent_fallback"}, {"no_custom_kernel"}, QUICK),
    ("cheat_torch_compile.py", {"uses_torch_compile"}, {"no_custom_kernel"}, QUICK),
    ("cheat_hidden_torch_ops.py", {"hides_torch_ops"}, {"no_custom_kernel"}, QUICK),
    # honest where checked (strict fp32), no work under the timing's PyTorch defaults
    ("cheat_detects_timing_settings.py", set(), {"behaviour_changes_when_timed"},
     VerifyOptions(seeds=2, shape_variants=0, timing=True, compare_compile=False,
                   timing_budget_s=0.3, timeout_s=300)),
    # correct under both settings, but PyTorch's (the reference's) ops while timed: the calls
    # profiled under the timing's settings ran none of its own kernels
    ("cheat_reference_ops_when_timed.py", {"reuses_reference_op"}, {"no_custom_kernel"},
     VerifyOptions(seeds=2, shape_variants=0, timing=True, compare_compile=False,
                   timing_budget_s=0.3, timeout_s=300)),
]


@pytest.mark.parametrize("name, static_codes, dynamic_codes, options", CHEATS,
                         ids=[f"{c[0]}-{'timed' if c[3].timing else 'untimed'}"
                              for c in CHEATS])
def test_cheat_is_rejected_for_the_right_reason(name, static_codes, dynamic_codes, options):
    verdict = _verify(name, options)
    assert verdict.status == "rejected" and verdict.exit_code() == 1
    codes = set(verdict.codes())
    assert static_codes <= codes, verdict.reasons
    dynamic = {r.code for r in verdict.reasons if r.line is None}
    assert dynamic_codes <= dynamic, verdict.reasons


def test_compile_error_points_at_the_candidate_line():
    verdict = _verify("bad_compile_error.py", QUICK)
    assert verdict.codes() == ["compile_error"]
    path = CANDIDATES / "bad_compile_error.py"
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "% cols" in text)
    assert verdict.reasons[0].line == line, verdict.reasons[0]
    assert "cols" in verdict.reasons[0].message


# Multi-GB inputs (KernelBench level 1 sizes): inputs generated on the GPU, outputs compared
# there by the judge, and every dynamic check still fires.
REF_LARGE = CANDIDATES / "ref_scale_relu_large.py"
LARGE_CHEATS = [
    ("cheat_cached_output.py", {"wrong_output", "output_reused_across_calls"}, QUICK),
    ("cheat_stale_memory.py", {"unwritten_output", "no_custom_kernel"}, QUICK),
    ("cheat_side_stream.py", {"side_stream_work"}, QUICK),
    ("cheat_mutates_input.py", {"mutates_input", "output_aliases_input"}, QUICK),
    ("cheat_partial_output.py", {"unwritten_output"}, QUICK),
    ("cheat_shape_specialised.py", {"unwritten_output"}, QUICK),  # 16M of 1.6G elements
]


@pytest.mark.gpu_memory
def test_honest_candidate_on_a_6_gib_input_is_accepted_with_a_memory_plan():
    options = VerifyOptions(seeds=3, shape_variants=2, timing=True, compare_compile=False,
                            timing_budget_s=0.3, timeout_s=400)
    verdict = _verify("honest_scale_relu.py", options, REF_LARGE)
    assert verdict.status == "accepted", verdict.reasons
    assert [[393216, 4096]] in verdict.shapes and len(verdict.shapes) >= 4
    plan = verdict.memory_plan
    assert plan and plan["fits"] and plan["input_bytes"] == 393216 * 4096 * 4
    assert any(n.startswith("memory plan") for n in verdict.notes)
    assert verdict.timings is not None and verdict.timings.candidate_ms.median > 0


@pytest.mark.gpu_memory
@pytest.mark.parametrize("name, dynamic_codes, options", LARGE_CHEATS,
                         ids=[c[0] for c in LARGE_CHEATS])
def test_every_dynamic_check_fires_on_a_6_gib_input(name, dynamic_codes, options):
    verdict = _verify(name, options, REF_LARGE)
    assert verdict.status == "rejected", verdict.reasons
    dynamic = {r.code for r in verdict.reasons if r.line is None}
    assert dynamic_codes <= dynamic, verdict.reasons


def test_a_problem_too_large_for_the_gpu_cannot_be_verified_and_says_why():
    verdict = _verify("honest_scale_relu.py", QUICK, CANDIDATES / "ref_too_large.py")
    assert verdict.status == "could_not_verify" and verdict.codes() == ["too_large"]
    assert "GiB" in verdict.reasons[0].message
