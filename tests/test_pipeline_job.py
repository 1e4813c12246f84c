"""The job process and the pipeline's failure paths (no GPU, no compiler needed)."""

import json
import subprocess
import sys
import threading

from kernelstitch.agents.job_protocol import JobRequest, decode_event
from kernelstitch.agents.pipeline import PipelineConfig, run_generate, run_verify

from kernelstitch.core.workspace import Workspace

NO_INPUTS = """
import torch.nn as nn
class Block(nn.Module):
    def forward(self, x):
        return x.relu()
"""


def run_job(request_line: str, cwd):
    proc = subprocess.run(
        [sys.executable, "-m", "kernelstitch.agents.job"], input=request_line + "\n",
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )
    events = [decode_event(line) for line in proc.stdout.splitlines()]
    return proc, events


def test_module_without_inputs_fails_with_the_fix_in_the_message(tmp_path):
    source = tmp_path / "block.py"
    source.write_text(NO_INPUTS)
    events = []
    result = run_generate(source, None, Workspace(tmp_path), PipelineConfig(), events.append)
    assert result.status == "failed"
    assert "get_inputs_Block" in result.message


def test_verify_without_generated_candidate_says_generate_first(tmp_path):
    source = tmp_path / "block.py"
    source.write_text(NO_INPUTS)
    result = run_verify(source, "Block", None, Workspace(tmp_path), PipelineConfig(),
                        lambda e: None, threading.Event())
    assert result.status == "failed" and "run generate first" in result.message


def test_job_process_reports_bad_request_as_a_result_line(tmp_path):
    proc, events = run_job("this is not json", tmp_path)
    assert proc.returncode == 2
    assert len(events) == 1 and events[0].status == "failed"
    assert "bad job request" in events[0].message


def test_job_process_ends_with_exactly_one_result(tmp_path):
    source = tmp_path / "block.py"
    source.write_text(NO_INPUTS)
    request = JobRequest(kind="generate", source_path=str(source), module="Block",
                         workspace=str(tmp_path))
    proc, events = run_job(request.to_json(), tmp_path)
    results = [e for e in events if e.type == "result"]
    assert len(results) == 1 and results[-1] is events[-1]
    assert results[0].status == "failed" and proc.returncode == 1
    # Nothing but events on stdout: every line decoded above.
    assert all(json.loads(line) for line in proc.stdout.splitlines())


def test_re_verifying_trusts_only_the_built_in_coders_unchanged_file(tmp_path):
    """The run store remembers the built-in coder's delivered file by content hash: a
    re-verification from disk (watch, on save, the bench) honours its bound declaration
    while the file is unchanged, and judges any edited file as untrusted."""
    import shutil
    from pathlib import Path

    from kernelstitch.agents.pipeline import delivered_trust

    from kernelstitch.core.runstore import RunStore

    source = tmp_path / "conv2d_bias_relu.py"
    shutil.copyfile(Path(__file__).resolve().parents[1] / "examples" / "conv2d_bias_relu.py",
                    source)
    ws = Workspace(tmp_path)
    generated = run_generate(source, None, ws, PipelineConfig(verify=False, search=False),
                             lambda e: None)
    candidate = Path(generated.candidate_path)
    store = RunStore(ws.runstore_path)
    assert delivered_trust(store, candidate, source).builtin
    first = run_verify(source, None, None, ws, PipelineConfig(), lambda e: None)
    codes = [r["code"] for r in first.verdict["reasons"]]
    assert "reuses_reference_op" not in codes  # its declared cuDNN conv counts

    candidate.write_text(candidate.read_text() + "\n# edited\n")
    assert not delivered_trust(store, candidate, source).builtin
    edited = run_verify(source, None, None, ws, PipelineConfig(), lambda e: None)
    assert "reuses_reference_op" in [r["code"] for r in edited.verdict["reasons"]]
