"""KernelBench metrics of `kernelstitch bench` (fast_p, geomean) on hand-made outcomes."""

import dataclasses
import math

import pytest
from kernelstitch.agents.job_protocol import JobResult

from kernelstitch.bench import ProblemOutcome, fast_p, geomean, render_markdown, summarise
from kernelstitch.core.precision import timing_settings_label


def outcome(name, status, speedup, compiled=None):
    return ProblemOutcome(problem=name, status=status, message="", speedup_vs_eager=speedup,
                          speedup_vs_compiled=compiled)


def test_geomean_ignores_missing_values():
    assert math.isclose(geomean([2.0, 8.0, None]), 4.0)
    assert geomean([]) is None


def test_fast_p_counts_only_correct_and_faster_over_all_problems():
    outcomes = [
        outcome("a", "accepted", 2.5), outcome("b", "accepted", 1.2),
        outcome("c", "rejected", 9.0),  # fast but wrong: never counts
        outcome("d", "accepted", 0.8),
    ]
    assert fast_p(outcomes, 0.0, "speedup_vs_eager") == 0.75
    assert fast_p(outcomes, 1.0, "speedup_vs_eager") == 0.5
    assert fast_p(outcomes, 2.0, "speedup_vs_eager") == 0.25


def test_summary_and_markdown_table():
    outcomes = [outcome("a", "accepted", 2.0, 1.5), outcome("b", "could_not_verify", None)]
    summary = summarise(outcomes)
    assert summary["accepted"] == 1 and summary["correctness_rate"] == 0.5
    assert math.isclose(summary["geomean_speedup_vs_eager"], 2.0)
    text = render_markdown(outcomes, summary, {"date": "d", "device": "H100"}, "cmd")
    assert "| a | accepted |" in text and "| b | could_not_verify |" in text


def test_outcome_from_job_result_reads_verdict_timings():
    result = JobResult(
        status="succeeded", message="ok", kind="generate", source_path="x.py", module="Model",
        plan={"steps": [{"technique": "fused_elementwise"}]},
        verdict={"status": "accepted", "reasons": [], "timings": {
            "eager_ms": {"median": 2.0}, "candidate_ms": {"median": 1.0},
            "speedup_vs_eager": 2.0, "significant_vs_eager": True}},
    )
    o = ProblemOutcome.from_result("x", result)
    assert (o.status, o.eager_ms, o.candidate_ms, o.speedup_vs_eager) == ("accepted", 2.0, 1.0, 2.0)
    assert o.plan_steps == ["fused_elementwise"]


def test_fast_0_is_the_correctness_rate_even_without_timings():
    outcomes = [outcome("a", "accepted", None), outcome("b", "accepted", 3.0),
                outcome("c", "timeout", None), outcome("d", "failed", None)]
    assert fast_p(outcomes, 0.0, "speedup_vs_eager") == 0.5
    assert fast_p(outcomes, 1.5, "speedup_vs_eager") == 0.25
    assert fast_p([], 1.0, "speedup_vs_eager") == 0.0


def test_fast_p_is_strictly_faster_and_per_baseline():
    outcomes = [outcome("a", "accepted", 2.0, 0.9), outcome("b", "accepted", 1.0, 1.6)]
    assert fast_p(outcomes, 2.0, "speedup_vs_eager") == 0.0  # exactly 2x is not > 2x
    assert fast_p(outcomes, 1.0, "speedup_vs_eager") == 0.5
    assert fast_p(outcomes, 1.5, "speedup_vs_compiled") == 0.5
    assert fast_p(outcomes, 1.0, "speedup_vs_compiled") == 0.5


def test_geomean_of_known_values():
    assert math.isclose(geomean([1.0, 4.0, 16.0]), 4.0)
    assert math.isclose(geomean([0.5, 2.0]), 1.0)
    assert geomean([None, 0.0]) is None  # zero or missing speedups carry no information


def test_summary_counts_statuses_compiles_and_leaves_roofline_unset():
    outcomes = [
        ProblemOutcome(problem="a", status="accepted", message="", speedup_vs_eager=4.0,
                       speedup_vs_compiled=2.0, compiled=True, roofline_fraction=0.5),
        ProblemOutcome(problem="b", status="accepted", message="", speedup_vs_eager=1.0,
                       speedup_vs_compiled=0.5, compiled=True, roofline_fraction=0.25),
        ProblemOutcome(problem="c", status="rejected", message="", compiled=False,
                       reasons=["compile_error"]),
        ProblemOutcome(problem="d", status="timeout", message="", reused=True),
    ]
    s = summarise(outcomes)
    assert (s["problems"], s["accepted"], s["correctness_rate"]) == (4, 2, 0.5)
    assert (s["compiled"], s["compile_failures"], s["reused"]) == (2, 1, 1)
    assert s["by_status"] == {"accepted": 2, "rejected": 1, "timeout": 1}
    assert math.isclose(s["geomean_speedup_vs_eager"], 2.0)
    assert math.isclose(s["geomean_speedup_vs_compiled"], 1.0)
    assert s["fast_p_vs_eager"] == {"0.0": 0.5, "1.0": 0.25, "1.5": 0.25, "2.0": 0.25}
    assert math.isclose(s["mean_roofline_fraction"], 0.375)
    unprofiled = summarise([outcome("a", "accepted", 2.0)])
    assert unprofiled["mean_roofline_fraction"] is None  # never invented without a profile


def test_outcome_reads_spreads_and_compile_errors_from_the_verdict():
    stat = {"median": 2.0, "p10": 1.8, "p90": 2.5, "n": 50}
    result = JobResult(
        status="succeeded", message="ok", kind="verify", source_path="x.py", module="Model",
        verdict={"status": "accepted", "reasons": [], "device": "NVIDIA H100", "timings": {
            "eager_ms": stat, "compiled_ms": {**stat, "median": 1.5}, "candidate_ms": {
                "median": 1.0, "p10": 0.9, "p90": 1.1, "n": 50},
            "speedup_vs_eager": 2.0, "speedup_vs_compiled": 1.5, "significant_vs_eager": True,
            "significant_vs_compiled": False}},
    )
    o = ProblemOutcome.from_result("x", result)
    assert o.eager_spread_ms == [1.8, 2.5] and o.candidate_spread_ms == [0.9, 1.1]
    assert (o.compiled_ms, o.speedup_vs_compiled, o.significant_vs_compiled) == (1.5, 1.5, False)
    assert o.compiled is True and o.device == "NVIDIA H100" and o.correct
    rejected = ProblemOutcome.from_result("y", JobResult(
        status="succeeded", message="rejected: compile_error", kind="verify", source_path="y.py",
        module="Model", verdict={"status": "rejected", "reasons": [{"code": "compile_error"}]}))
    assert rejected.compiled is False and rejected.reasons == ["compile_error"]
    failed = ProblemOutcome.from_result("z", JobResult(
        status="failed", message="could not capture", kind="generate", source_path="z.py",
        module=None))
    assert failed.status == "failed" and failed.message == "could not capture"


def test_markdown_shows_spreads_roofline_and_compile_failures():
    outcomes = [
        ProblemOutcome(problem="a", status="accepted", message="", eager_ms=2.0,
                       eager_spread_ms=[1.8, 2.5], speedup_vs_eager=2.0, roofline_fraction=0.42,
                       compiled=True),
        ProblemOutcome(problem="b", status="rejected", message="compilation failed: boom",
                       reasons=["compile_error"], compiled=False,
                       compile_message="kernel.cu(3): error: boom"),
    ]
    text = render_markdown(outcomes, summarise(outcomes), {"date": "d"}, "kernelstitch bench x")
    assert "| a | accepted | yes | 2.0000 (1.8000–2.5000) |" in text
    assert "| 42% |" in text
    assert "| b | rejected (compile_error) | no |" in text
    assert "## Compile failures" in text and "kernel.cu(3): error: boom" in text
    assert "`kernelstitch bench x`" in text


def test_rejections_say_why_in_json_and_markdown():
    result = JobResult(
        status="succeeded", message="rejected", kind="verify", source_path="x.py", module="Model",
        verdict={"status": "rejected", "reasons": [
            {"code": "shape_specialised", "message": "not for input shapes [[8195, 4096]]: max err 3"}]},
    )
    o = ProblemOutcome.from_result("mlp", result)
    assert o.reason_details == ["shape_specialised: not for input shapes [[8195, 4096]]: max err 3"]
    assert ProblemOutcome.from_json(o.to_json()).reason_details == o.reason_details
    text = render_markdown([o], summarise([o]), {"date": "d"}, "cmd")
    assert "## Why candidates were rejected" in text
    assert "**mlp**: shape_specialised: not for input shapes [[8195, 4096]]: max err 3" in text


def test_stage_times_are_medians_overall_and_per_level_without_cancelled_problems():
    def timed(name, level, prepare, measure, stages, status="accepted"):
        return ProblemOutcome(problem=name, status=status, message="", level=level,
                              prepare_s=prepare, measure_s=measure, verify_stage_s=stages)

    outcomes = [
        timed("a", "1", 10.0, 30.0, {"reference": 8.0, "reference.cases": 6.0, "candidate": 9.0}),
        timed("b", "1", 20.0, 50.0, {"reference": 10.0, "candidate": 11.0, "variants": 7.0}),
        timed("c", "2", 40.0, None, {}, status="rejected"),  # a build failure: no measure
        timed("d", "2", 99.0, 99.0, {"reference": 99.0}, status="cancelled"),
    ]
    summary = summarise(outcomes)
    groups = summary["stage_times"]
    assert list(groups) == ["all", "level1", "level2"]
    every = groups["all"]
    assert (every["problems"], every["prepared"], every["measured"]) == (3, 3, 2)
    assert (every["prepare_s"], every["measure_s"]) == (20.0, 40.0)
    assert every["verify_stage_s"] == {"reference": [9.0, 2], "reference.cases": [6.0, 1],
                                       "candidate": [10.0, 2], "variants": [7.0, 1]}
    assert groups["level2"]["measure_s"] is None and groups["level2"]["prepare_s"] == 40.0
    text = render_markdown(outcomes, summary, {"date": "d"}, "cmd")
    assert "## Stage times" in text
    assert "| all | 3 | 20.0 (3) | 40.0 (2) |" in text
    assert "| level2 | 1 | 40.0 (1) | - (0) |" in text
    assert "| reference | 9.00 (2) | 9.00 (2) | - |" in text
    assert "| &nbsp;&nbsp;reference.cases | 6.00 (1) | 6.00 (1) | - |" in text
    # one folder without levels: only "all"
    assert list(summarise([timed("x", None, 1.0, 2.0, {})])["stage_times"]) == ["all"]


def test_published_baselines_compare_our_eager_with_theirs():
    fast = ProblemOutcome(problem="level1/1_a", status="accepted", message="", level="1",
                          eager_ms=2.2, compiled_ms=1.0, candidate_ms=1.0, speedup_vs_eager=2.2,
                          published_eager_ms=2.0, published_compiled_ms=1.0)
    wrong = ProblemOutcome(problem="level1/2_b", status="rejected", message="", level="1",
                           published_eager_ms=5.0, published_compiled_ms=4.0)
    plain = ProblemOutcome(problem="3_c", status="accepted", message="", eager_ms=1.0,
                           candidate_ms=1.0)
    summary = summarise([fast, wrong, plain])
    published = summary["published_baselines"]
    assert published["problems"] == 2 and published["eager_compared"] == 1
    assert math.isclose(published["geomean_eager_vs_published"], 1.1)
    assert math.isclose(published["geomean_compiled_vs_published"], 1.0)
    assert math.isclose(published["geomean_speedup_vs_published_eager"], 2.0)
    text = render_markdown([fast, wrong, plain], summary,
                           {"date": "d", "published_baselines": {"hardware": "H100 HBM3"}}, "c")
    assert "KB H100 eager ms | KB H100 compile ms |" in text
    assert text.count("| 2.000 | 1.000 |") == 1 and "| 5.000 | 4.000 |" in text
    assert "our eager / theirs, geomean 1.10 over 1" in text and "H100 HBM3" in text
    assert "near 1: this machine times like theirs" in text
    # twice their eager time (cuDNN's TF32 off, 2026-11-27): said, not called near 1
    slow = dataclasses.replace(fast, eager_ms=4.4)
    slow_text = render_markdown([slow], summarise([slow]), {"date": "d"}, "c")
    assert "geomean 2.20 over 1" in slow_text and "near 1" not in slow_text
    assert "far from 1" in slow_text and "do not compare" in slow_text
    # what the times were taken under: a result without it comes from before 638c584
    assert "1 problem(s) come from runs before 2026-11-27" in slow_text
    now = dataclasses.replace(fast, timed_under=timing_settings_label("fp32"))
    merged = render_markdown([now, slow], summarise([now, slow]), {"date": "d"}, "c")
    assert "timed under PyTorch's defaults (cuDNN convolutions and RNNs in TF32" in merged
    assert "correctness checked in strict fp32" in merged and "1 problem(s) come from" in merged
    strict = dataclasses.replace(fast, timed_under=timing_settings_label("strict"), precision="strict")
    assert "timed under TF32 off for cuBLAS and cuDNN" in render_markdown(
        [strict], summarise([strict]), {"date": "d"}, "c")
    assert summarise([plain])["published_baselines"] is None
    assert "KB H100" not in render_markdown([plain], summarise([plain]), {"date": "d"}, "c")


def test_portable_command_names_no_machine_paths(tmp_path):
    from kernelstitch.bench.report import portable_command

    command = (f"kernelstitch bench {tmp_path}/problems --out /root/out/bench "
               f"--only=/mnt/data/x.py --levels 2")
    text = portable_command(command, cwd=tmp_path)
    assert text == "kernelstitch bench problems --out …/bench --only=…/x.py --levels 2"
    assert "/root" not in text and str(tmp_path) not in text


def _kept(problem: str, verdict: dict, original_ms: float, variant: str,
          variant_ms: float) -> ProblemOutcome:
    """The outcome of a search that kept the original (`variant` its fastest contender)."""
    def stat(median):
        return {"median": median, "p10": median - 0.1, "p90": median + 0.1, "n": 30}

    selection = {"decision": "keep_original", "winner": None, "original_ms": stat(original_ms),
                 "variants": [{"name": variant, "reason": "r", "time_ms": stat(variant_ms)}]}
    result = JobResult(status="succeeded", message="kept", kind="generate", source_path="x.py",
                       module="Model", verdict=verdict, selection=selection)
    return ProblemOutcome.from_result(problem, result)


def test_a_kept_original_counts_at_one_x_apart_from_accepted():
    stat = {"median": 2.0, "p10": 1.9, "p90": 2.1, "n": 30}
    verdict = {"status": "accepted", "reasons": [], "timings": {
        "eager_ms": stat, "compiled_ms": {**stat, "median": 1.0},
        "candidate_ms": {"median": 2.6, "p10": 2.5, "p90": 2.7, "n": 30},
        "speedup_vs_eager": 0.98, "speedup_vs_compiled": 0.5, "significant_vs_eager": False,
        "significant_vs_compiled": True}}
    kept = _kept("p1", verdict, 2.0, "default", 2.2)
    assert kept.status == "kept" and kept.correct and kept.delivered == "original"
    assert kept.speedup_vs_eager == 1.0 and kept.speedup_vs_compiled == 0.5
    assert kept.variants_ms == {"original": 2.0, "default": 2.2}
    # what is delivered is the original: its time and spread, not the recorded variant's
    assert kept.candidate_ms == 2.0 and kept.candidate_spread_ms == [1.9, 2.1]
    assert kept.timed_under == timing_settings_label("fp32")  # said in the report and results.json
    slow = ProblemOutcome(problem="p2", status="accepted", message="", speedup_vs_eager=0.8,
                          significant_vs_eager=True)
    summary = summarise([kept, slow])
    assert summary["kept"] == 1 and summary["accepted"] == 2 and summary["slower_than_eager"] == 1


def test_a_kept_original_whose_record_verification_stopped_early_still_counts_at_one_x():
    """A contender rejected by a static check has no timings: the kept original is 1.00x vs
    eager from the search's time of it (left out, kept problems would lift the geomean), and the
    summary says how many correct problems have no torch.compile time."""
    verdict = {"status": "rejected", "reasons": [{"code": "reuses_reference_op", "message": "m"}],
               "timings": {}}
    kept = _kept("level1/16_T", verdict, 2.6, "3xtf32", 1.6)
    assert kept.status == "kept" and kept.speedup_vs_eager == 1.0 and kept.candidate_ms == 2.6
    assert kept.speedup_vs_compiled is None
    # the search timed it under the verification's settings (not a run from before them)
    assert kept.timed_under == timing_settings_label("fp32")
    fast = ProblemOutcome(problem="level1/2_S", status="accepted", message="", speedup_vs_eager=4.0,
                          speedup_vs_compiled=4.0)
    summary = summarise([kept, fast])
    assert summary["geomean_speedup_vs_eager"] == 2.0 and summary["without_compiled_time"] == 1
    assert "(1 correct without a torch.compile time left out)" in render_markdown([kept, fast], summary, {}, "bench")


def test_faster_variants_not_delivered_are_named_with_why():
    """A variant timed faster than the delivered one carries its note into the outcome and the
    report (level2/93 delivered a 2.9 ms variant over a 2.0 ms one, and nothing said why)."""
    def stat(median):
        return {"median": median, "p10": median - 0.1, "p90": median + 0.1, "n": 30}

    selection = {"decision": "deliver", "winner": "ndhwc-graph", "original_ms": stat(5.8), "variants": [
        {"name": "ndhwc", "reason": "r", "time_ms": stat(2.0),
         "note": "verification: rejected (wrong_output: seed 3 differs)"},
        {"name": "ndhwc-graph", "reason": "r", "time_ms": stat(2.9), "verdict": "accepted"},
        {"name": "graph", "reason": "r", "time_ms": stat(3.4), "note": "not verified"},
        {"name": "default", "reason": "r", "time_ms": stat(2.5)}]}
    verdict = {"status": "accepted", "reasons": [], "timings": {
        "eager_ms": stat(5.8), "compiled_ms": stat(1.6), "candidate_ms": stat(2.9),
        "speedup_vs_eager": 2.0, "speedup_vs_compiled": 0.55, "significant_vs_eager": True,
        "significant_vs_compiled": True}}
    result = JobResult(status="succeeded", message="ok", kind="generate", source_path="x.py",
                       module="Model", verdict=verdict, selection=selection)
    outcome = ProblemOutcome.from_result("level2/93", result)
    # faster and with a note: named; slower (graph) or faster without a note (default): not
    assert outcome.passed_over == {"ndhwc": "verification: rejected (wrong_output: seed 3 differs)"}
    assert ProblemOutcome.from_json(outcome.to_json()).passed_over == outcome.passed_over
    text = render_markdown([outcome], summarise([outcome]), {}, "kernelstitch bench")
    assert "## Faster variants not delivered" in text
    assert "ndhwc (2.000 ms): verification: rejected (wrong_output: seed 3 differs)" in text


def test_memory_bound_kernels_bandwidth_from_plan_bytes_and_profiled_kernel_time():
    """Issue 22's >= 80% target: a delivered plan's memory-bound steps' bytes over their kernels'
    GPU time (the library calls around them left out), kernels deduplicated under an earlier
    step's name counted, small working sets (L2-resident) not counted."""
    from kernelstitch.bench.metrics import (
        MIN_KERNEL_BYTES,
        kernel_bandwidth_fraction,
        set_bandwidth_fractions,
        summarise,
    )
    from kernelstitch.bench.outcome import memory_bound_step_bytes

    plan = {"steps": [
        {"technique": "library_call", "estimated_bytes": 9 << 30, "spec": {"type": "torch_op"}},
        {"technique": "fused_reduction", "estimated_bytes": 600 << 20, "spec": {"name": "ks_s2_softmax"}},
        {"technique": "fused_elementwise", "estimated_bytes": 400 << 20, "spec": {"name": "ks_s3_elementwise"}},
        {"technique": "fused_elementwise", "estimated_bytes": 1 << 20, "spec": {"name": "ks_s31_elementwise"}}]}
    nbytes = memory_bound_step_bytes(plan)
    assert nbytes == {"ks_s2_softmax": 600 << 20, "ks_s3_elementwise": 400 << 20,
                      "ks_s31_elementwise": 1 << 20}
    peak = float((1001 << 20) * 1000)  # bytes/s: the three steps' bytes in 1 ms
    kernels = {"void ks_s2_softmax_row<4>(float const*, float*)": 600.0,
               "ks_s3_elementwise_kernel<4>": 300.0,  # also runs step 31's launches (deduplicated)
               "sm90_xmma_gemm_f32f32": 5000.0,  # a library kernel: not counted
               "ks_s30_other": 7000.0}  # a step that is not memory-bound: not counted
    assert kernel_bandwidth_fraction(nbytes, kernels, peak) == pytest.approx(1 / 0.9)  # the bytes of 1 ms in 0.9 ms
    assert kernel_bandwidth_fraction({"ks_s31_elementwise": MIN_KERNEL_BYTES - 1},
                                     kernels, peak) is None  # runs from L2: says nothing of DRAM
    assert kernel_bandwidth_fraction(nbytes, {}, peak) is None
    assert kernel_bandwidth_fraction(nbytes, kernels, None) is None

    def outcome(name, status, delivered, us):
        return ProblemOutcome(problem=name, status=status, message="", candidate_ms=2.0,
                              kernel_bytes=nbytes, kernel_us={"ks_s2_softmax_row": us},
                              delivered=delivered)

    outcomes = [outcome("fast", "accepted", "ours:default", 700.0),
                outcome("slow", "accepted", "ours:nchw", 2000.0),
                outcome("kept", "kept", "original", 700.0)]
    set_bandwidth_fractions(outcomes, peak)
    assert [o.kernel_bandwidth_fraction is not None for o in outcomes] == [True, True, False]
    summary = summarise(outcomes)
    assert summary["kernel_bandwidth_problems"] == 2 and summary["kernel_bandwidth_at_target"] == 1
    markdown = render_markdown(outcomes, summary, {}, "cmd")
    assert "| k 143% |" in markdown  # the kernels' fraction, marked as such
    assert "DRAM bandwidth of our memory-bound kernels" in markdown and "at >= 80%: 1" in markdown


def test_the_summary_names_noisy_torch_compile_baselines_and_a_p10_geomean():
    """torch.compile's p10-p90 spread: a geomean against its p10 (its faster runs) beside the
    median-based one, and the problems whose p90 exceeds 1.15 x its p10 (level2/69 in the
    2026-12-07 run: median 1.07 ms, p10 0.88)."""
    steady = dataclasses.replace(outcome("a", "accepted", 2.0, 2.0), compiled_ms=2.0, candidate_ms=1.0,
                                 compiled_spread_ms=[1.9, 2.1])
    noisy = dataclasses.replace(outcome("b", "accepted", 2.0, 1.5), compiled_ms=1.5, candidate_ms=1.0,
                                compiled_spread_ms=[1.0, 1.6])
    untimed = outcome("c", "accepted", 2.0)  # no torch.compile time: in neither geomean
    summary = summarise([steady, noisy, untimed])
    assert math.isclose(summary["geomean_speedup_vs_compiled"], math.sqrt(2.0 * 1.5))
    assert math.isclose(summary["geomean_speedup_vs_compiled_p10"], math.sqrt(1.9 * 1.0))
    assert summary["compiled_p10_problems"] == 2 and summary["noisy_compiled"] == ["b"]
    text = render_markdown([steady, noisy, untimed], summary, {"date": "d", "device": "H100"}, "cmd")
    assert "against torch.compile's p10 instead of its median (its faster runs; 2 problems): 1.38" in text
    assert "p90 over 1.15x its p10 on 1: b" in text
    quiet = summarise([steady])
    assert quiet["noisy_compiled"] == [] and "on 0" in render_markdown([steady], quiet, {}, "cmd")
