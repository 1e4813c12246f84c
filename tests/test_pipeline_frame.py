"""The job frame every pipeline kind shares (agents/pipeline.py `_Job`): what a cancelled,
failed and successful run returns and records, and that no kind stores a literal API key.
The bodies are faked, so nothing here needs a GPU, a compiler or a worker."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from kernelstitch.agents import pipeline
from kernelstitch.agents.job_protocol import JobResult
from kernelstitch.agents.pipeline import (
    Cancelled,
    PipelineConfig,
    run_generate,
    run_profile,
    run_verify,
)

from kernelstitch.core.problem import ProblemError
from kernelstitch.core.workspace import Workspace

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.relu()

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
"""
SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 3


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "block.py"
    path.write_text(PROBLEM)
    return path


def _config(**kw) -> PipelineConfig:
    return PipelineConfig(llm={"model": "m", "api_key": SECRET, "api_key_env": SECRET}, **kw)


def _only_run(workspace: Workspace, kind: str):
    runs = workspace.runstore().list_runs(kind=kind)
    assert len(runs) == 1, runs
    return runs[0]


def _run(kind: str, source, workspace, config, cancel=None):
    if kind == "generate":
        return run_generate(source, None, workspace, config, lambda e: None, cancel)
    if kind == "verify":
        return run_verify(source, None, None, workspace, config, lambda e: None, cancel)
    return run_profile(source, None, workspace, config, lambda e: None, cancel)


@pytest.fixture
def fake_bodies(monkeypatch, source):
    """Every kind's work replaced; `state["raise"]` makes each raise that exception instead."""
    import kernelstitch.profiler.profile as profile

    state: dict = {"raise": None}
    verdict = SimpleNamespace(status="rejected", reasons=[SimpleNamespace(code="wrong_output")],
                              timings=None, to_json=lambda: {"status": "rejected"})

    def maybe_raise():
        if state["raise"] is not None:
            raise state["raise"]

    def generate(ctx, store, run_id):
        maybe_raise()
        return JobResult(status="succeeded", message="written", kind="generate",
                         source_path=str(ctx.source), module=ctx.module, run_id=run_id)

    def verify(ctx, path, **_origin):  # builtin=, allowance=: what the pipeline trusts
        maybe_raise()
        return verdict

    def profile_module(path, module, **kw):
        maybe_raise()
        return SimpleNamespace(kernels=[1, 2], to_json=lambda: '{"findings": [{"id": 1}]}')

    monkeypatch.setattr(pipeline, "_generate", generate)
    monkeypatch.setattr(pipeline, "verify_candidate", verify)
    monkeypatch.setattr(profile, "profile_module", profile_module)
    workspace = Workspace(source.parent)
    candidate = workspace.output_dir(source.resolve(), "Model") / "model_new.py"
    candidate.parent.mkdir(parents=True, exist_ok=True)
    candidate.write_text("# a candidate\n")
    return state


KINDS = ["generate", "verify", "profile"]


@pytest.mark.parametrize("kind", KINDS)
def test_success_returns_and_records_the_bodys_result(kind, source, fake_bodies):
    workspace = Workspace(source.parent)
    result = _run(kind, source, workspace, _config())
    run = _only_run(workspace, kind)
    assert result.status == "succeeded" and result.kind == kind and result.run_id == run.id
    assert result.module == "Model" and result.source_path == str(source.resolve())
    assert run.status == "succeeded" and run.module == "Model"
    expected = {
        "generate": {"message": "written"},
        "verify": {"message": "rejected: wrong_output", "verdict": "rejected"},
        "profile": {"message": "2 kernels, 1 findings"},
    }[kind]
    assert result.message == expected["message"] and run.summary == expected
    if kind == "verify":
        assert result.verdict == {"status": "rejected"}
        assert result.candidate_path.endswith("model_new.py")
        assert [a.kind for a in workspace.runstore().artifacts(run.id)] == ["verdict"]
    if kind == "profile":
        assert result.findings == [{"id": 1}]
        assert [a.kind for a in workspace.runstore().artifacts(run.id)] == ["profile"]


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_gives_a_cancelled_result_and_record(kind, source, fake_bodies):
    fake_bodies["raise"] = Cancelled()
    workspace = Workspace(source.parent)
    result = _run(kind, source, workspace, _config(), threading.Event())
    run = _only_run(workspace, kind)
    assert (result.status, result.message, result.kind) == ("cancelled", "cancelled", kind)
    assert result.run_id == run.id and result.module == "Model"
    assert run.status == "cancelled" and run.summary == {"message": "cancelled"}


@pytest.mark.parametrize("kind", KINDS)
def test_problem_error_gives_a_failed_result_and_record(kind, source, fake_bodies):
    fake_bodies["raise"] = ProblemError("the forward does not trace")
    workspace = Workspace(source.parent)
    result = _run(kind, source, workspace, _config())
    run = _only_run(workspace, kind)
    prefix = "could not profile: " if kind == "profile" else ""
    assert result.status == "failed" and result.run_id == run.id
    assert result.message == prefix + "the forward does not trace"
    assert run.status == "failed" and run.summary == {"message": "the forward does not trace"}


@pytest.mark.parametrize("error", ["NoGpuError", "TaskError"])
def test_profile_specific_errors_fail_the_profile(error, source, fake_bodies):
    from kernelstitch.profiler.profile import NoGpuError
    from kernelstitch.profiler.runner import TaskError

    fake_bodies["raise"] = {"NoGpuError": NoGpuError, "TaskError": TaskError}[error]("no device")
    workspace = Workspace(source.parent)
    result = run_profile(source, None, workspace, _config(), lambda e: None)
    run = _only_run(workspace, "profile")
    assert (result.status, result.message) == ("failed", "could not profile: no device")
    assert run.status == "failed" and run.summary == {"message": "no device"}


def test_other_errors_are_not_the_frames_to_swallow(source, fake_bodies):
    fake_bodies["raise"] = RuntimeError("bug")
    with pytest.raises(RuntimeError):
        _run("generate", source, Workspace(source.parent), _config())


@pytest.mark.parametrize("kind", KINDS)
def test_no_kind_stores_a_literal_key(kind, source, fake_bodies):
    workspace = Workspace(source.parent)
    _run(kind, source, workspace, _config())
    run = _only_run(workspace, kind)
    assert run.config["llm"] == {"model": "m"}
    assert SECRET not in repr(run.config)
    assert run.config["seeds"] == 3 and run.config["coder"] == "builtin"


@pytest.mark.parametrize("kind", KINDS)
def test_refusals_record_no_run(kind, tmp_path, fake_bodies):
    no_inputs = tmp_path / "bare.py"
    no_inputs.write_text("import torch.nn as nn\nclass Block(nn.Module):\n"
                         "    def forward(self, x):\n        return x\n")
    workspace = Workspace(tmp_path)
    result = _run(kind, no_inputs, workspace, _config())
    assert result.status == "failed" and result.run_id is None and result.module == "Block"
    assert workspace.runstore().list_runs() == []


def test_missing_module_fails_before_recording(source):
    workspace = Workspace(source.parent)
    result = run_generate(source, "Nope", workspace, _config(), lambda e: None)
    assert result.status == "failed" and "no nn.Module class 'Nope'" in result.message
    assert result.module == "Nope" and workspace.runstore().list_runs() == []
