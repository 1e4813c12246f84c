"""The precision opt-in on a GPU (issue 24): a GEMM-bound module generated under tf32 / bf16 is
verified against float64 with the precision's bound, its error and the three speed-ups are
reported, and the same program judged as strict fp32 is rejected (the fp32 bound is what keeps
TF32 out of default runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

from kernelstitch.agents.pipeline import PipelineConfig, run_generate
from kernelstitch.agents.verifier import VerifyOptions, verify

from kernelstitch.core.workspace import Workspace

# K = 4096: TF32's 10-bit mantissa puts the outputs ~1e-3 x RMS from float64, ten times fp32's
# bound and ten times under tf32's.
GEMM_MODULE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 0.5


def get_inputs():
    return [torch.randn(384, 4096)]


def get_init_inputs():
    return [4096, 2048]
'''


def _generate(tmp_path: Path, precision: str):
    source = tmp_path / f"gemm_{precision}.py"
    source.write_text(GEMM_MODULE)
    ws = Workspace(tmp_path)
    config = PipelineConfig(seeds=2, timing_budget_s=0.5, search=False, precision=precision)
    result = run_generate(source, None, ws, config, lambda _e: None)
    assert result.status == "succeeded", result.message
    return source, result


@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_a_reduced_precision_is_verified_against_float64_and_reported(tmp_path, precision):
    source, result = _generate(tmp_path, precision)
    assert result.plan["host"]["precision"] == precision
    gemms = [s for s in result.plan["steps"] if (s.get("spec") or {}).get("type") == "gemm"]
    assert gemms and all(s["spec"]["precision"] == precision for s in gemms)
    verdict = result.verdict
    assert verdict["status"] == "accepted", verdict["reasons"]
    report = verdict["precision"]
    bound = {"tf32": 1e-2, "bf16": 5e-2}[precision]
    assert report["precision"] == precision and report["cases"] >= 2
    # the reduced precision shows in the error, and stays inside its bound
    assert report["fp32_max_rel_error"] < report["max_rel_error"] <= bound
    timings = verdict["timings"]
    assert timings["precision"] == precision and timings["eager_fp32_ms"]["median"] > 0
    assert timings["speedup_vs_eager_fp32"] > 0 and timings["compiled_ms"] is not None
    assert precision in (Path(result.report_path).read_text())


def test_the_same_program_judged_as_strict_fp32_is_rejected(tmp_path):
    source, result = _generate(tmp_path, "tf32")
    candidate = Path(result.candidate_path)
    verdict = verify(source, candidate, options=VerifyOptions(seeds=2, timing=False))
    assert verdict.status == "rejected"
    assert "wrong_output" in verdict.codes(), verdict.reasons
    assert verdict.precision is None  # strict fp32: judged against the fp32 reference
