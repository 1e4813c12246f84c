"""KernelBench metrics of `kernelstitch bench` (fast_p, geomean) on hand-made outcomes."""

import math

from kernelstitch.agents.bench import ProblemOutcome, fast_p, geomean, render_markdown, summarise
from kernelstitch.agents.job_protocol import JobResult


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
