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
