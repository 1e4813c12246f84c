"""End to end on a CUDA machine: the torch backend, ncu when on PATH, and `profile_command`."""

from __future__ import annotations

import json
import shutil

import pytest
from test_profiler_support import FIXTURES

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

PROBLEM = FIXTURES / "problem_small.py"


@pytest.fixture(autouse=True)
def _peak_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KERNELSTITCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def test_torch_profile_task_records_lines(tmp_path):
    from kernelstitch.profiler.tasks import torch_profile
    from kernelstitch.profiler.torch_trace import load_trace, parse_trace

    meta = torch_profile(str(PROBLEM), None, str(tmp_path / "t.json"), warmup=2, iters=2)
    assert meta["forward_ms"] > 0 and meta["device"]["sm_count"] > 0
    kernels = parse_trace(load_trace(tmp_path / "t.json"))
    assert {13, 14, 15, 16, 17} <= {k.line for k in kernels}


def test_profile_module_torch_backend(tmp_path):
    from kernelstitch.profiler.profile import profile_module

    report = profile_module(PROBLEM, None, backends=["torch"], work_dir=tmp_path)
    assert report.backends_used == ["torch.profiler"]
    assert report.kernels and all(k.total_us > 0 for k in report.kernels)
    assert any(f.rule == "fusable-elementwise-chain" for f in report.findings)
    assert report.roofline is not None and report.roofline.peaks.measured


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu not on PATH")
def test_profile_module_with_ncu(tmp_path):
    from kernelstitch.profiler import ncu as m
    from kernelstitch.profiler.profile import profile_module

    report = profile_module(PROBLEM, None, backends=["torch", "ncu", "nsys"], work_dir=tmp_path)
    assert "ncu" in report.backends_used
    gemm = [k for k in report.kernels if k.category == "gemm"]
    assert gemm and m.DURATION in gemm[0].metrics
    assert not [f for f in report.findings if f.rule == "gemm-not-on-tensor-cores"]
    if shutil.which("nsys") is None:
        assert any(f.rule == "nsys-unavailable" for f in report.findings)


def test_profile_command_writes_json_and_plot(tmp_path, capsys):
    from kernelstitch.profiler.cli import profile_command
    from kernelstitch.profiler.findings import ProfileReport

    code = profile_command(f"{PROBLEM}::Model", json_out=tmp_path / "p.json",
                           backends=["torch"], plot=tmp_path / "roof.png")  # fmt: skip
    assert code == 0
    report = ProfileReport.from_json((tmp_path / "p.json").read_text())
    assert report.module == "Model" and report.findings
    assert (tmp_path / "roof.png").stat().st_size > 1000
    assert "re-read this tensor" in capsys.readouterr().out
    json.loads((tmp_path / "p.json").read_text())
