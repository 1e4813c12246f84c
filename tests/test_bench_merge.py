"""`kernelstitch bench-merge`: runs made in several calls join into one report (no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelstitch.bench.merge import merge_results


def problem(name: str, status: str, eager: float, ours: float, compiled: float) -> dict:
    return {"problem": name, "status": status, "message": "", "level": "2",
            "eager_ms": eager, "compiled_ms": compiled, "candidate_ms": ours,
            "speedup_vs_eager": eager / ours, "speedup_vs_compiled": compiled / ours,
            "significant_vs_eager": status == "accepted", "eager_spread_ms": [eager * 0.9,
                                                                                eager * 1.1],
            "candidate_spread_ms": [ours * 0.5, ours * 0.6]}


def results(path: Path, command: str, problems: list[dict]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.json").write_text(json.dumps({
        "schema": 1, "command": command, "environment": {"device": "Fake GPU"},
        "problems": problems}))
    return path / "results.json"


def test_a_later_run_wins_and_the_summary_covers_every_problem(tmp_path):
    first = results(tmp_path / "a", "kernelstitch bench --only 1,2", [
        problem("level2/1_A", "accepted", 2.0, 1.0, 1.0),
        problem("level2/2_B", "cancelled", 2.0, 1.0, 1.0)])
    second = results(tmp_path / "b", "kernelstitch bench --only 2,10", [
        problem("level2/2_B", "kept", 2.0, 2.0, 4.0),
        problem("level2/10_C", "accepted", 3.0, 1.5, 1.5)])
    summary, sources = merge_results([first, second], tmp_path / "out")
    assert [s.problems for s in sources] == [2, 2]
    assert summary["problems"] == 3 and summary["kept"] == 1
    assert summary["by_status"] == {"accepted": 2, "kept": 1}
    assert summary["geomean_speedup_vs_eager"] == pytest.approx((2.0 * 1.0 * 2.0) ** (1 / 3))
    merged = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [p["problem"] for p in merged["problems"]] == ["level2/1_A", "level2/2_B",
                                                          "level2/10_C"]
    kept = merged["problems"][1]
    assert kept["candidate_spread_ms"] == kept["eager_spread_ms"]  # the original is delivered
    text = (tmp_path / "out" / "results.md").read_text()
    assert "kernelstitch bench --only 1,2" in text and "kernelstitch bench --only 2,10" in text


def test_a_later_cancelled_outcome_keeps_the_earlier_result(tmp_path):
    first = results(tmp_path / "a", "full run", [problem("level2/23_G", "accepted", 2.0, 1.0, 1.5)])
    second = results(tmp_path / "b", "partial rerun", [problem("level2/23_G", "cancelled", 2.0, 1.0, 1.5),
                                                       problem("level2/24_H", "cancelled", 2.0, 1.0, 1.5)])
    summary, _ = merge_results([first, second], tmp_path / "out")
    assert summary["by_status"] == {"accepted": 1, "cancelled": 1}
    merged = {p["problem"]: p["status"] for p in json.loads((tmp_path / "out" / "results.json").read_text())["problems"]}
    assert merged == {"level2/23_G": "accepted", "level2/24_H": "cancelled"}


def test_the_cli_says_what_is_wrong_with_a_file(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("{}")
    done = subprocess.run([sys.executable, "-m", "kernelstitch", "bench-merge", str(bad),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "not a bench results.json" in done.stderr


def test_a_kept_original_without_timings_merges_at_one_x(tmp_path):
    """Results written before outcome.py filled them: a kept original whose record verification
    stopped early counts at 1.00x vs eager from the search's time of the original."""
    kept = {"problem": "level1/16_T", "status": "kept", "message": "kept", "level": "level1",
            "variants_ms": {"original": 2.6, "3xtf32": 1.6}}
    fast = {"problem": "level1/2_S", "status": "accepted", "message": "", "level": "level1",
            "speedup_vs_eager": 4.0, "speedup_vs_compiled": 4.0, "eager_ms": 4.0, "candidate_ms": 1.0}
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"problems": [kept, fast], "command": "bench a"}))
    summary, _ = merge_results([path], tmp_path / "out")
    assert summary["geomean_speedup_vs_eager"] == 2.0 and summary["without_compiled_time"] == 1


def test_a_later_timeout_replaces_a_result_unless_asked_to_leave_the_measured_one(tmp_path):
    """By default a timeout is a result like any other; --finished-over-timeouts leaves an earlier
    measured result standing and says so in the report's notes and the problem's own."""
    first = results(tmp_path / "a", "full run", [problem("level2/92_G", "accepted", 4.0, 2.0, 1.8),
                                                 problem("level2/93_H", "rejected", 2.0, 1.0, 1.5)])
    timeout = problem("level2/92_G", "timeout", 0, 1, 1)
    timeout["message"] = "over the 220 s time limit during measure"
    second = results(tmp_path / "b", "rerun", [timeout, {**problem("level2/93_H", "timeout", 0, 1, 1)}])
    summary, _ = merge_results([first, second], tmp_path / "plain")
    assert summary["by_status"] == {"timeout": 2}
    summary, _ = merge_results([first, second], tmp_path / "kept", finished_over_timeouts=True)
    assert summary["by_status"] == {"accepted": 1, "timeout": 1}  # a rejection is not a measurement
    merged = json.loads((tmp_path / "kept" / "results.json").read_text())
    (kept,) = [p for p in merged["problems"] if p["problem"] == "level2/92_G"]
    assert kept["candidate_ms"] == 2.0
    assert any("a later timeout in b/results.json" in n and "a/results.json" in n for n in kept["notes"])
    text = (tmp_path / "kept" / "results.md").read_text()
    assert "level2/92_G: a later timeout in b/results.json (over the 220 s time limit during measure)" in text
    assert "--finished-over-timeouts" in merged["command"]


def test_the_cli_takes_finished_over_timeouts(tmp_path):
    first = results(tmp_path / "a", "full run", [problem("level2/92_G", "accepted", 4.0, 2.0, 1.8)])
    second = results(tmp_path / "b", "rerun", [problem("level2/92_G", "timeout", 0, 1, 1)])
    done = subprocess.run([sys.executable, "-m", "kernelstitch", "bench-merge", str(first), str(second),
                           "--out", str(tmp_path / "out"), "--finished-over-timeouts"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    merged = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [p["status"] for p in merged["problems"]] == ["accepted"]
