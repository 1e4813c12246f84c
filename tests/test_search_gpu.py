"""One real measured search on the GPU: variants built, timed against the original in one
worker, the winner verified where it is delivered (or the original kept), the choice cached."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from kernelstitch.agents.pipeline import PipelineConfig, run_choose, run_generate

from kernelstitch.core.workspace import Workspace

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _check(result, out: Path):
    assert result.status == "succeeded", result.message
    selection = result.selection
    assert selection is not None and selection["decision"] in ("deliver", "keep_original")
    timed = [v for v in selection["variants"] if v["time_ms"]]
    assert timed and selection["original_ms"]["median"] > 0
    graphed = selection["original_graph"]  # the original replayed from a CUDA graph
    assert graphed["name"] == "original-graph" and graphed["time_ms"]["median"] > 0
    if selection["decision"] == "deliver":
        verdict = result.verdict
        assert verdict["status"] == "accepted"
        assert verdict["timings"]["speedup_vs_eager"] > 1.0
        assert verdict["timings"]["significant_vs_eager"]
        assert Path(result.candidate_path) == out / "model_new.py"
    else:
        assert result.candidate_path is None and not (out / "model_new.py").exists()
    return selection


def test_generate_searches_and_a_second_generate_reuses_the_choice(tmp_path):
    source = tmp_path / "conv2d_bias_relu.py"
    shutil.copyfile(EXAMPLES / "conv2d_bias_relu.py", source)
    ws = Workspace(tmp_path)
    config = PipelineConfig(seeds=2, timing_budget_s=0.5, search_budget_s=1.5)
    first = run_generate(source, None, ws, config, lambda _e: None)
    out = ws.output_dir(source, "Model")
    selection = _check(first, out)
    assert {v["name"] for v in selection["variants"]} >= {"default", "nchw"}
    second = run_generate(source, None, ws, config, lambda _e: None)
    again = _check(second, out)
    assert again["reused"] and again["decision"] == selection["decision"]


def test_the_bench_halves_prepare_then_choose(tmp_path):
    # a row softmax (the `_row` kernel family, which the fast-exp knob changes); the strided
    # softmax of softmax_dim1_3d.py runs the column loop since 2026-11-26, which no knob varies
    source = tmp_path / "softmax_temperature.py"
    shutil.copyfile(EXAMPLES / "softmax_temperature.py", source)
    ws = Workspace(tmp_path)
    config = PipelineConfig(seeds=2, timing_budget_s=0.5, search_budget_s=1.5)
    prepared = run_generate(source, None, ws, PipelineConfig(verify=False), lambda _e: None)
    assert prepared.status == "succeeded"
    out = ws.output_dir(source, "Model")
    assert (out / "variants" / "manifest.json").is_file()
    stages: list[str] = []  # what the search said it did: the assertion's message
    chosen = run_choose(source, None, ws, config, lambda e: stages.append(e.message))
    selection = _check(chosen, out)
    # the softmax kernel dominates the GPU time: its profile drives a second round, which
    # builds the knob alternatives of the kernel family that ran (under variants/)
    second_round = [v for v in selection["variants"] if v["reason"].startswith("round 2")]
    assert second_round, ([v["name"] for v in selection["variants"]], stages[-12:])
    assert all((out / "variants" / v["name"] / "model_new.py").is_file() for v in second_round)
