"""bench-coverage (kernelstitch/bench/coverage.py): capture in a worker, plan, count the steps
left to PyTorch.  CPU only: captures run on the meta device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelstitch.bench.coverage import (
    ProblemCoverage,
    failure_cause,
    render_markdown,
    run_coverage,
    summarise,
)
from kernelstitch.cli import app

FUSABLE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)

def get_inputs():
    return [torch.rand(8, 64)]

def get_init_inputs():
    return []
'''

FALLBACK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.flip(x * 2.0, [1])  # a flip: no built-in kernel

def get_inputs():
    return [torch.rand(2, 4, 16, 16)]

def get_init_inputs():
    return []
'''

RAISES = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        raise ValueError("boom at capture")

def get_inputs():
    return [torch.rand(4)]

def get_init_inputs():
    return []
'''


def _folder(root: Path) -> Path:
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "1_Fusable.py").write_text(FUSABLE)
    (root / "level1" / "2_Scan.py").write_text(FALLBACK)
    (root / "level2" / "1_Raises.py").write_text(RAISES)
    return root


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    return _folder(tmp_path_factory.mktemp("coverage"))


@pytest.fixture(scope="module")
def results(bench: Path) -> list[ProblemCoverage]:
    return run_coverage(bench, jobs=2, timeout_s=120)


def test_per_problem(results):
    by_name = {r.name: r for r in results}
    assert [r.name for r in results] == ["level1/1_Fusable", "level1/2_Scan", "level2/1_Raises"]
    fusable = by_name["level1/1_Fusable"]
    assert fusable.status == "planned" and fusable.fallbacks == [] and fusable.steps >= 1
    pool = by_name["level1/2_Scan"]
    assert pool.status == "planned"
    assert [f["op"] for f in pool.fallbacks] == ["flip"]
    assert pool.fallbacks[0]["aten"].startswith("aten.flip")
    raises = by_name["level2/1_Raises"]
    assert raises.status == "capture_failed"
    assert raises.error["stage"] == "capture" and raises.error["kind"] == "exception"
    assert "boom at capture" in raises.error["message"]
    assert raises.error["cause"] == "ValueError: boom at capture"


def test_summary_counts_and_grouping(results):
    summary = summarise(results)
    assert list(summary) == ["1", "2", "all"]
    one, two, total = summary["1"], summary["2"], summary["all"]
    assert (one["problems"], one["planned"], one["capture_failed"], one["with_fallback"]) \
        == (2, 2, 0, 1)
    assert one["fallback_ops"] == [{"op": "flip", "steps": 1, "problems": 1,
                                    "examples": ["level1/2_Scan"]}]
    assert (two["problems"], two["planned"], two["capture_failed"]) == (1, 0, 1)
    assert two["capture_failures"] == [{"cause": "ValueError: boom at capture", "problems": 1,
                                        "names": ["level2/1_Raises"]}]
    assert (total["problems"], total["planned"], total["capture_failed"],
            total["with_fallback"], total["fallback_steps"]) == (3, 2, 1, 1, 1)
    text = render_markdown(summary)
    assert "| `flip` | 1 / 1 |  | 1 / 1 |" in text
    assert "| level 2 | ValueError: boom at capture | 1 | 1_Raises |" in text


def test_failure_causes_group_across_problems():
    a = failure_cause("exception", "line 12: torch.export could not trace Model.forward: "
                      "RuntimeError: Tensor 'x' has size 32\nmore")
    b = failure_cause("exception", "line 40: torch.export could not trace Model.forward: "
                      "RuntimeError: Tensor 'w' has size 7")
    assert a == b == "RuntimeError: Tensor '…' has size N"
    assert failure_cause("crash", "worker died", "SIGSEGV") == "crash (SIGSEGV)"
    assert failure_cause("timeout", "task took longer than 120 s") == "timeout"


def test_cli_writes_outputs(bench: Path, tmp_path: Path):
    out, md = tmp_path / "out" / "coverage.json", tmp_path / "coverage.md"
    result = CliRunner().invoke(app, ["bench-coverage", str(bench), "--levels", "1", "--jobs",
                                      "2", "--out", str(out), "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert [p["name"] for p in report["problems"]] == ["level1/1_Fusable", "level1/2_Scan"]
    assert report["summary"]["1"]["with_fallback"] == 1
    assert "| `flip` | 1 / 1 |" in md.read_text()


def test_cli_bad_folder(tmp_path: Path):
    result = CliRunner().invoke(app, ["bench-coverage", str(tmp_path / "missing")])
    assert result.exit_code == 2
