"""Planted keys never land anywhere: whole `generate` runs with the LLM coder, through the CLI
and through the job process, then every byte they produced (the workspace tree with
runs.sqlite and its WAL, the report, the candidates, stdout, stderr) is searched for them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kernelstitch.agents.job_protocol import JobRequest, decode_event
from llm_scripts import EXAMPLE, GOOD, fenced, plan_json
from llm_stub_server import StubLLM

# The case: a key pasted where the variable's NAME belongs, shorter than 20 chars.
PASTED_KEY = "sk-test-SECRET123"
# A key held by a valid variable, as a real one would be; the stub server echoes it back.
PLANTED_KEY = "sk-planted-7f3a9c1e5b2d4f6a8c0e"
PLANTED_ENV = "KS_TEST_PLANTED_KEY"
# What is searched: the distinctive part, so a partial echo is found too.
NEEDLES = ("SECRET123", "7f3a9c1e5b2d4f6a8c0e")
MODEL = "secret-test-model"  # the positive control: the search does find stored text


@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    source = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, source)
    return source


def occurrences(root: Path, needles: tuple[str, ...], **texts: str) -> list[str]:
    """Where any needle occurs: every file under `root` (as bytes: the SQLite pages and the
    WAL as they are on disk) and each named text."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {n}" for n in needles if n.encode() in data]
    for name, text in texts.items():
        found += [f"{name}: {n}" for n in needles if n in text]
    return found


def cli_generate(problem: Path, *options: str,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelstitch", "generate", str(problem), "--llm",
         "--llm-model", MODEL, "--max-iterations", "1", "--llm-timeout", "30", "--json",
         "--workspace", str(problem.parent), *options],
        capture_output=True, text=True, timeout=300, cwd=problem.parent,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def result_of(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("{"):])


def stored_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (root / ".kernelstitch").glob("runs.sqlite*"))


def test_a_key_given_as_the_variable_name_is_in_no_artifact_of_a_cli_run(stub, problem):
    proc = cli_generate(problem, "--llm-base-url", stub.base_url, "--llm-api-key-env",
                        PASTED_KEY)
    result = result_of(proc.stdout)
    assert "llm.api_key_env" in result["message"] and "was refused" in result["message"]
    assert stub.chat_requests() == []  # refused before any request
    report = Path(result["report_path"])
    assert "API key variable refused" in report.read_text()
    assert MODEL.encode() in stored_bytes(problem.parent)  # the search sees stored text
    assert occurrences(problem.parent, NEEDLES, stdout=proc.stdout, stderr=proc.stderr) == []


def test_a_planted_key_echoed_by_the_endpoint_is_in_no_artifact_of_a_cli_run(stub, problem):
    """The key is sent (Authorization) and the server echoes it everywhere it can: in an error
    body, in the plan, in the candidate file.  None of it reaches a file or the output."""
    stub.error(500, f"Incorrect API key provided: {PLANTED_KEY}")
    stub.reply(plan_json(notes=[f"planned with key {PLANTED_KEY}"]))
    stub.reply(fenced(GOOD.replace("one fused grid-stride kernel",
                                   f"key {PLANTED_KEY}"), f"Your key is {PLANTED_KEY}."))
    proc = cli_generate(problem, "--llm-base-url", stub.base_url, "--llm-api-key-env",
                        PLANTED_ENV, env={PLANTED_ENV: PLANTED_KEY})
    result = result_of(proc.stdout)
    requests = stub.chat_requests()
    assert len(requests) == 3, (result["message"], proc.stderr[-2000:])
    assert all(r.headers["authorization"] == f"Bearer {PLANTED_KEY}" for r in requests)
    attempt = problem.parent / ".kernelstitch"
    candidates = list(attempt.rglob("llm/attempt-1/model_new.py"))
    assert candidates and "key <redacted>" in candidates[0].read_text()
    assert MODEL.encode() in stored_bytes(problem.parent)
    assert occurrences(problem.parent, NEEDLES, stdout=proc.stdout, stderr=proc.stderr) == []


def test_a_key_in_a_job_request_is_in_no_event_result_or_artifact(stub, problem):
    """The job process (what the editor's server runs), given the pasted key as the variable's
    name in both spellings and as a literal key."""
    request = JobRequest(kind="generate", source_path=str(problem), module=None,
                         workspace=str(problem.parent), config={
                             "coder": "llm", "verify": False,
                             "llm": {"base_url": stub.base_url, "model": MODEL,
                                     "api_key_env": PASTED_KEY, "apiKeyEnv": PASTED_KEY,
                                     "api_key": PASTED_KEY}})
    proc = subprocess.run([sys.executable, "-m", "kernelstitch.agents.job"],
                          input=request.to_json() + "\n", capture_output=True, text=True,
                          timeout=300, cwd=problem.parent)
    events = [decode_event(line) for line in proc.stdout.splitlines()]
    result = events[-1]
    assert result.type == "result" and result.status == "succeeded", result.message
    assert "never read from settings" in result.message  # the literal key is named, not shown
    assert stub.chat_requests() == []
    assert MODEL.encode() in stored_bytes(problem.parent)
    assert occurrences(problem.parent, NEEDLES, stdout=proc.stdout, stderr=proc.stderr) == []
