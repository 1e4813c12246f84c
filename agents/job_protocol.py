"""The wire format between a job process and whoever started it (the language server, the CLI).

A job (`python -m kernelstitch.agents.job KIND ...`) prints one JSON object per line on stdout:
progress events while it runs and exactly one result at the end.  Everything else it has to say
goes to stderr.  Torch-free: the language server imports this module.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

JobKind = Literal["generate", "verify", "profile"]
Stage = Literal[
    "loading", "planning", "coding", "compiling", "verifying", "profiling", "reporting"
]
JobStatus = Literal["succeeded", "failed", "cancelled"]


@dataclass(frozen=True)
class JobRequest:
    kind: JobKind
    source_path: str
    module: str | None
    workspace: str
    candidate_path: str | None = None  # verify: the candidate file (default: the generated one)
    config: dict[str, Any] = field(default_factory=dict)  # server/CLI settings (budgets, device)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobRequest:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class ProgressEvent:
    stage: Stage
    message: str
    step: int | None = None  # e.g. coding step k of n
    total: int | None = None
    type: Literal["progress"] = "progress"


@dataclass(frozen=True)
class JobResult:
    status: JobStatus
    message: str
    kind: JobKind
    source_path: str
    module: str | None
    candidate_path: str | None = None  # generated model_new.py
    report_path: str | None = None
    plan: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None  # Verdict.to_json()
    findings: list[dict[str, Any]] = field(default_factory=list)  # profiler Findings
    run_id: int | None = None
    # generate's measured search: decision (deliver | keep_original), the table, why
    # (agents/verifier/selection.py Selection.to_json()); None when no search ran.
    selection: dict[str, Any] | None = None
    type: Literal["result"] = "result"


JobEvent = ProgressEvent | JobResult


def encode_event(event: JobEvent) -> str:
    return json.dumps(asdict(event), separators=(",", ":"))


def decode_event(line: str) -> JobEvent:
    """Parse one stdout line of a job; raises ValueError for anything that is not an event."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("job event is not a JSON object")
    kind = data.get("type")
    if kind == "progress":
        return ProgressEvent(**data)
    if kind == "result":
        return JobResult(**data)
    raise ValueError(f"unknown job event type {kind!r}")
