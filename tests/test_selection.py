"""Measure, then choose: the selection logic on recorded timings (no GPU)."""

from __future__ import annotations

from kernelstitch.agents.verifier.selection import (
    MeasuredVariant,
    Selection,
    contenders,
    deliver,
    delivers,
    keep_original,
    markdown_table,
    nothing_faster_reason,
)
from kernelstitch.agents.verifier.stats import build_timings, summarize
from kernelstitch.agents.verifier.verdict import Reason, Verdict


def stat(center: float, spread: float = 0.01):
    return summarize([center * (1 + spread * k / 10) for k in range(-10, 11)])


def variant(name: str, center: float | None, spread: float = 0.01) -> MeasuredVariant:
    return MeasuredVariant(name, f"{name} reason",
                           time_ms=None if center is None else stat(center, spread),
                           error=None if center is not None else "compile_error")


def accepted(eager: float, ours: float) -> Verdict:
    timings = build_timings([eager * (1 + k / 1000) for k in range(30)], None,
                            [ours * (1 + k / 1000) for k in range(30)])
    return Verdict(status="accepted", timings=timings)


def test_only_significantly_faster_variants_contend_fastest_first():
    original = stat(1.0)
    measured = [variant("slow", 1.3), variant("noise", 0.995, spread=0.05),
                variant("fast", 0.6), variant("faster", 0.5), variant("broken", None)]
    order = contenders(original, measured)
    assert [v.name for v in order] == ["faster", "fast"]
    notes = {v.name: v.note for v in measured}
    assert notes["slow"] == "not faster than the original"
    assert notes["noise"] == "within noise of the original"


def test_a_verified_contender_must_still_beat_eager_significantly():
    assert delivers(accepted(1.0, 0.5)) == (True, "")
    ok, why = delivers(accepted(1.0, 1.2))
    assert not ok and "0.83x" in why
    ok, why = delivers(Verdict(status="rejected", reasons=[Reason("wrong_output", "bad")]))
    assert not ok and "wrong_output" in why
    ok, why = delivers(Verdict(status="accepted"))
    assert not ok and "no timings" in why
    # a summary reason first, the failure with its numbers second: both are said
    ok, why = delivers(Verdict(status="rejected", reasons=[
        Reason("behaviour_changes_when_timed", "fails under the timing settings"),
        Reason("wrong_output", "output 0: 12 of 4096 elements differ, max abs error 3e-3")]))
    assert not ok and "timing settings; output 0: 12 of 4096" in why


def test_keep_the_original_when_nothing_beats_it():
    original = stat(1.0)
    measured = [variant("a", 1.1), variant("b", 1.02)]
    assert contenders(original, measured) == []
    why = nothing_faster_reason(original, measured)
    assert "the best, b" in why and "kept" in why
    selection = keep_original(original, measured, why)
    assert selection.decision == "keep_original" and selection.winner is None
    table = markdown_table(selection)
    assert "| original | your module, eager |" in table and "**kept**" in table
    assert "**delivered**" not in table


def test_deliver_names_the_winner_and_round_trips_through_json():
    original = stat(1.0)
    measured = [variant("default", 0.7), variant("nograph", 0.8), variant("broken", None)]
    winner = contenders(original, measured)[0]
    selection = deliver(original, measured, winner, accepted(1.0, 0.7))
    assert selection.decision == "deliver" and selection.winner == "default"
    assert "1.43x vs eager" in selection.why
    again = Selection.from_json(selection.to_json())
    assert again == selection
    table = markdown_table(again)
    assert "| default | default reason | 0.7000 |" in table and "**delivered**" in table
    assert "| broken | broken reason | - | - | compile_error |" in table
