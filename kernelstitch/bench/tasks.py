"""Worker tasks of `kernelstitch bench` (they import generated code: run them in a worker).

build_candidate: import a generated model_new.py and call its `_build_extension()`, so the
    compile cache (KS_EXTENSIONS_DIR, see wrapper.py) holds the compiled module before the GPU
    phase needs it (the Verifier's own build of the same sources is then a cache hit).  Returns
    the seconds it took, whether it was a cache hit, and each ninja step's seconds (.ninja_log).
profile_reference: run the pipeline's profile of the reference module in this worker, whose
    CUDA_VISIBLE_DEVICES the bench set; the profiler's own workers inherit it.
gpu_info: torch/CUDA versions and the visible GPUs' names (the bench process stays torch-free
    and never creates a CUDA context on a GPU that is measuring).
measure_problem: a problem's whole measure phase in a worker pinned to one GPU (the bench set
    CUDA_VISIBLE_DEVICES), so every process it starts measures on that GPU; progress goes to
    stderr, which the bench forwards.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

BUILD_ERROR_MARKER = "Error building extension"
BENCH_PROFILERS = ("torch",)  # the roofline floor needs shapes and peaks, not ncu counters


def gpu_info() -> dict[str, Any]:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "names": [torch.cuda.get_device_name(i) for i in range(count)]}


def build_candidate(path: str, jobs: int | None = None) -> dict[str, Any]:
    """Build the candidate at `path` (a generated model_new.py) with `jobs` compiler processes
    (MAX_JOBS, which its _build_extension reads; None: the worker's own)."""
    import torch

    if jobs is not None:
        os.environ["MAX_JOBS"] = str(max(1, jobs))

    from kernelstitch.core.problem import ProblemError, import_file

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA GPU visible to the build worker"}
    try:
        module = import_file(Path(path), prefix="ks_prebuild")
    except ProblemError as exc:
        return {"error": True, "message": f"the candidate does not import: {exc}", "output": ""}
    build = getattr(module, "_build_extension", None)
    if build is None:
        return {"skipped": "the candidate has no _build_extension (nothing to compile)"}
    start, wall_start = time.monotonic(), time.time()
    try:
        extension = build()
    except Exception as exc:  # noqa: BLE001 - any build failure is the candidate's
        return {"error": True, **_build_failure(exc, Path(path))}
    result: dict[str, Any] = {"built": True, "seconds": time.monotonic() - start}
    library = Path(getattr(extension, "__file__", None) or "")
    if library.is_file():
        result["cached"] = library.stat().st_mtime < wall_start
        if not result["cached"]:
            result["steps"] = ninja_steps(library.parent)
    return result


def ninja_steps(folder: Path) -> dict[str, float]:
    """Seconds of each target of the last ninja build in `folder` (its .ninja_log: start ms,
    end ms, mtime, target, hash; a target's last line wins), e.g. main.o, cuda.cuda.o, x.so."""
    steps: dict[str, float] = {}
    try:
        lines = (folder / ".ninja_log").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return steps
    for line in lines:
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
            steps[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000.0
    return steps


def _build_failure(exc: BaseException, path: Path) -> dict[str, str]:
    from kernelstitch.agents.verifier.diagnostics import map_diagnostics

    output = str(exc.__cause__ or exc)
    if BUILD_ERROR_MARKER not in str(exc) and BUILD_ERROR_MARKER not in output:
        return {"message": f"building the extension raised {type(exc).__name__}: {exc}"[:1000],
                "output": output}
    try:
        source = path.read_text(encoding="utf-8")
    except OSError:
        source = ""
    first = next((d for d in map_diagnostics(output, source) if d.severity == "error"), None)
    where = f" (model_new.py line {first.line})" if first and first.line else ""
    message = (f"compilation failed{where}: {first.message}" if first
               else "compilation failed (see the compiler output)")
    return {"message": message, "output": output}


def profile_reference(path: str, module: str | None, workspace: str) -> dict[str, Any]:
    from kernelstitch.agents.pipeline import PipelineConfig, run_profile
    from kernelstitch.core.workspace import Workspace

    ws = Workspace(workspace)
    config = PipelineConfig(profile=True, profilers=BENCH_PROFILERS)
    result = run_profile(Path(path), module, ws, config, lambda _event: None)
    if result.status != "succeeded" or result.run_id is None:
        return {"error": result.message}
    artifacts = ws.runstore().artifacts(result.run_id, "profile")
    if not artifacts:
        return {"error": "the profile was not found in the run store"}
    content = artifacts[-1].content
    report = json.loads(content) if isinstance(content, str) else content
    roof = report.get("roofline")
    if not roof or not roof.get("actual_ms"):
        return {"error": "the profile has no roofline (no GPU kernels were seen)"}
    return {"floor_ms": roof["floor_ms"], "actual_ms": roof["actual_ms"], "bound": roof["bound"],
            "run_id": result.run_id}


def measure_problem(prepared: dict[str, Any], settings: dict[str, Any], workspace: str,
                    time_left_s: float) -> dict[str, Any]:
    import sys
    import threading

    from kernelstitch.bench.phases import PhaseContext, Prepared
    from kernelstitch.bench.runner import LOG_PREFIX, PipelineRunner
    from kernelstitch.bench.settings import BenchSettings
    from kernelstitch.core.workspace import Workspace

    def log(_problem: str, message: str) -> None:
        print(LOG_PREFIX + message.replace("\n", " "), file=sys.stderr, flush=True)

    runner = PipelineRunner(Workspace(workspace), BenchSettings.from_json(settings), log)
    # Cancelling kills this worker (and, through their orphan watch, the workers it started).
    ctx = PhaseContext(device=None, cancel=threading.Event(), time_left_s=time_left_s)
    return runner.measure_here(Prepared.from_json(prepared), ctx).to_json()
