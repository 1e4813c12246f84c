"""A stand-in for `python -m kernelstitch.agents.job` speaking the same JSON-lines protocol.

Deterministic and fast, for the language server's progress/cancel/diagnostics tests.  Its
behaviour is read from a comment in the source file, so each test document picks its own:

    # fake-job: delay=0.2 steps=3 verdict=accepted speedup=1.8 findings=12,14 ignore_term=1

It writes the candidate and report where the server expects generated files (the server's own
layout helper) and appends every request to $FAKE_JOB_LOG when set.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

from kernelstitch.agents.job_protocol import JobRequest, JobResult, ProgressEvent, encode_event
from kernelstitch.server.layout import output_dir

cancelled = False


def _on_term(*_):
    global cancelled
    cancelled = True


def emit(event) -> None:
    sys.stdout.write(encode_event(event) + "\n")
    sys.stdout.flush()


def options(source: str) -> dict[str, str]:
    match = re.search(r"#\s*fake-job:(.*)", source)
    pairs = match.group(1).split() if match else []
    return dict(p.split("=", 1) for p in pairs if "=" in p)


def sleep(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not cancelled:
        time.sleep(0.01)


CANDIDATE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Fake generated implementation."""

    def forward(self, x):
        return torch.relu(x)
'''


def persist(request: JobRequest, plan, verdict, profile, candidate: Path) -> int:
    """Record the run in the workspace's run store, as the real job does."""
    from kernelstitch.core.workspace import Workspace

    store = Workspace(Path(request.workspace)).runstore()
    run_id = store.start_run(request.kind, str(Path(request.source_path).resolve()),
                             request.module, request.config)
    if request.kind == "generate":
        store.add_artifact(run_id, "plan", "plan.json", plan)
        store.add_artifact(run_id, "candidate", "model_new.py", candidate.read_text())
    if request.kind in ("generate", "verify"):
        store.add_artifact(run_id, "verdict", "verdict.json", verdict)
    else:
        store.add_artifact(run_id, "profile", "profile.json", profile)
    store.finish_run(run_id, "succeeded", {})
    return run_id


def main() -> int:
    request = JobRequest.from_json(sys.stdin.readline())
    log = os.environ.get("FAKE_JOB_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(request.to_json() + "\n")
    source = Path(request.source_path)
    opts = options(source.read_text())
    if opts.get("ignore_term") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, _on_term)
    delay = float(opts.get("delay", "0.05"))
    steps = int(opts.get("steps", "2"))
    base = {"kind": request.kind, "source_path": request.source_path, "module": request.module}

    emit(ProgressEvent(stage="loading", message=f"pid={os.getpid()}"))
    stages: list[tuple[str, str, int | None, int | None]] = []
    if request.kind == "generate":
        stages.append(("planning", "capturing forward", None, None))
        stages += [("coding", f"fused kernel {k}", k, steps) for k in range(1, steps + 1)]
        stages += [("compiling", "nvcc", None, None), ("verifying", "checking", None, None)]
    elif request.kind == "verify":
        stages += [("compiling", "nvcc", None, None), ("verifying", "checking", None, None)]
    else:
        stages.append(("profiling", "torch.profiler", None, None))
    for stage, message, step, total in stages:
        sleep(delay)
        if cancelled:
            emit(JobResult(status="cancelled", message="cancelled", **base))
            return 0
        emit(ProgressEvent(stage=stage, message=message, step=step, total=total))
    sleep(delay)
    if cancelled:
        emit(JobResult(status="cancelled", message="cancelled", **base))
        return 0
    if opts.get("fail") == "1":
        print("fake failure on stderr", file=sys.stderr)
        emit(JobResult(status="failed", message="fake failure", **base))
        return 1

    out = output_dir(Path(request.workspace), source, request.module or "Model")
    out.mkdir(parents=True, exist_ok=True)
    candidate = Path(request.candidate_path) if request.candidate_path else out / "model_new.py"
    if request.kind == "generate":
        candidate.write_text(CANDIDATE)
        (out / "report.md").write_text(f"# report for {request.module}\n")
    status = opts.get("verdict", "could_not_verify")
    reasons = []
    if status != "accepted":
        code = "no_gpu" if status == "could_not_verify" else "wrong_output"
        reasons.append({"code": code, "message": f"fake {code}",
                        "line": int(opts.get("reason_line", "8"))})
    timings = None
    if "speedup" in opts:
        timings = {"speedup_vs_eager": float(opts["speedup"]), "significant_vs_eager": True}
    verdict = {"status": status, "reasons": reasons, "timings": timings}
    findings = []
    if request.kind == "profile" or opts.get("findings"):
        for line in opts.get("findings", "").split(","):
            if line:
                findings.append({"severity": "warning", "message": f"slow kernel on line {line}",
                                 "line": int(line), "detail": "3 kernels, 12% of peak",
                                 "suggestion": "fuse the elementwise chain"})
    plan = {"steps": [{"description": f"fused kernel {k}"} for k in range(1, steps + 1)]}
    profile = {"kernels": [{"name": "triton_fused_relu_mul", "calls": 1, "total_us": 12.5,
                            "floor_us": 5.0, "source_line": int(line), "category": "elementwise"}
                           for line in opts.get("findings", "").split(",") if line],
               "findings": findings}
    run_id = persist(request, plan, verdict, profile, candidate)
    emit(JobResult(
        status="succeeded",
        message=f"{status}" + (f": {float(opts['speedup']):.2f}x vs eager" if timings else ""),
        candidate_path=str(candidate) if request.kind != "profile" else None,
        report_path=str(out / "report.md") if request.kind == "generate" else None,
        plan=plan if request.kind == "generate" else None,
        verdict=verdict if request.kind != "profile" else None,
        findings=findings, run_id=run_id, **base,
    ))
    return 0


if __name__ == "__main__":
    sys.exit(main())
