"""`kernelstitch bench` for real on this CPU-only machine: the pipeline, workers, run store."""

import json
import subprocess
import sys
import threading
import time

import pytest
from bench_fakes import spec_for, write_problem

from kernelstitch.bench import BenchSettings, run_bench
from kernelstitch.bench.phases import PhaseContext
from kernelstitch.bench.runner import PipelineRunner
from kernelstitch.core.gpu_presence import cuda_may_be_present
from kernelstitch.core.workspace import Workspace

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(torch.cuda.is_available(), reason="expects a machine without a GPU"),
]


def bench_cli(folder, out, *extra):
    return subprocess.run(
        [sys.executable, "-m", "kernelstitch", "bench", str(folder), "--out", str(out), *extra],
        capture_output=True, text=True, timeout=240, cwd=folder.parent, check=False,
    )


def test_bench_cli_on_one_problem_without_gpu(tmp_path):
    # the run store's root is tmp_path: without a marker here the search would climb to a
    # .kernelstitch some other run left in /tmp and reuse its result of this very problem
    (tmp_path / "pyproject.toml").write_text("")
    folder = tmp_path / "kb"
    write_problem(folder / "level1" / "1_relu.py")
    write_problem(folder / "level2" / "1_other.py", scale=3.0)
    proc = bench_cli(folder, tmp_path / "out", "--levels", "1", "--time-limit", "200")
    assert proc.returncode == 2, proc.stderr  # completed, nothing verified (no GPU): as generate
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    (row,) = data["problems"]  # --levels 1 only
    assert row["problem"] == "level1/1_relu" and row["level"] == "1"
    assert row["status"] == "could_not_verify" and row["reasons"] == ["no_gpu"]
    assert row["compiled"] is None and row["plan_steps"]  # generated, not built (no GPU)
    # where verification time went: with no NVIDIA driver no worker starts at all
    # (core/gpu_presence.py); with one, the reference worker ran, found no GPU, and nothing after
    if cuda_may_be_present():
        assert set(row["verify_stage_s"]) == {"reference"} and row["verify_stage_s"]["reference"] > 0
    else:
        assert row["verify_stage_s"] == {}
    # run from tmp_path: the recorded command names no machine path
    assert data["command"] == "kernelstitch bench kb --out out --levels 1 --time-limit 200"
    assert data["environment"]["torch"] == torch.__version__
    assert data["environment"]["device"] == "no GPU"
    for name in data["plots"]:
        assert (tmp_path / "out" / name).read_bytes()[:4] == b"\x89PNG"
    assert "| level1/1_relu | could_not_verify (no_gpu) |" in proc.stdout

    again = bench_cli(folder, tmp_path / "out2", "--levels", "1")
    data2 = json.loads((tmp_path / "out2" / "results.json").read_text())
    assert again.returncode == 2 and data2["problems"][0]["reused"] is True
    assert data2["problems"][0]["status"] == "could_not_verify"


def test_real_runner_honours_the_time_limit(tmp_path):
    folder = tmp_path / "p"
    write_problem(folder / "1_relu.py")
    start = time.monotonic()
    run = run_bench(folder, tmp_path / "out", BenchSettings(time_limit_s=0.5), devices=[None],
                    env={"device": "no GPU"}, workspace_root=tmp_path)
    assert time.monotonic() - start < 30
    (outcome,) = run.outcomes
    assert outcome.status == "timeout" and "during prepare" in outcome.message


def test_measure_on_a_gpu_runs_every_process_with_that_gpu_visible(tmp_path):
    spec = spec_for(write_problem(tmp_path / "1_relu.py"))
    runner = PipelineRunner(Workspace(tmp_path), BenchSettings())
    prepared = runner.prepare(spec, PhaseContext(None, threading.Event(), 120.0))
    assert prepared.done is None and prepared.candidate_path

    outcome = runner.measure(prepared, PhaseContext(5, threading.Event(), 120.0))
    assert outcome.cuda_visible_devices == "5"  # what the measuring worker saw
    # GPU 5 does not exist here: the Verifier's own workers (which inherit it) found no GPU.
    assert outcome.status == "could_not_verify" and outcome.reasons == ["no_gpu"]
    assert outcome.plan_steps == prepared.plan_steps
