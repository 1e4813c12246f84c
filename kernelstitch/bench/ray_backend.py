"""--ray ADDRESS: each problem is one Ray task with num_gpus=1, beyond one machine.

The task runs the same `evaluate_problem` (prepare + measure under the time limit) as a local
run, on the GPU Ray assigned it (Ray sets CUDA_VISIBLE_DEVICES, so the workers inherit it), and
returns the same ProblemOutcome JSON.  Both phases stay in one task because the torch extension
cache that prepare warms is per node.  The problem's source travels with the task, so nodes need
KernelStitch and torch installed but not the problem folder.  `ray` is imported only here.
"""

from __future__ import annotations

import os
import platform
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import HARNESS_ERROR
from kernelstitch.bench.problems import BenchError, ProblemSpec
from kernelstitch.bench.schedule import OnEvent, ScheduleEvent
from kernelstitch.bench.settings import BenchSettings

RAY_MISSING = (
    "--ray needs the 'ray' package, which is not installed in this environment. Install it "
    "here and on every node of the cluster (pip install 'ray[default]'), with the same "
    "KernelStitch and torch versions, then start the cluster (see bench/README.md, Ray set-up)"
)
_POLL_S = 0.5

Task = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise BenchError(RAY_MISSING) from exc
    return ray


def resume_label(address: str, local_gpus: list[str]) -> str:
    """The device part of the resume key for a run on this cluster.  Ray names each node's
    accelerator (`accelerator_type:H100` resources); when the cluster holds one kind and this
    machine's GPUs are that kind, the label is this machine's GPU name, so a Ray run and a
    `--jobs` run on the same GPUs reuse each other's results.  Otherwise `ray:<kinds>` (results
    are shared only with Ray runs on the same kinds of accelerators), or `ray` when Ray names none.
    """
    ray = import_ray()
    ray.init(address=address, ignore_reinit_error=True)
    try:
        kinds = sorted(k.split(":", 1)[1] for k in ray.cluster_resources()
                       if k.startswith("accelerator_type:"))
    finally:
        ray.shutdown()
    names = sorted(set(local_gpus))
    if len(kinds) == 1 and len(names) == 1 and kinds[0].lower() in names[0].lower():
        return names[0]
    return "ray:" + ",".join(kinds) if kinds else "ray"


def problem_payload(spec: ProblemSpec) -> dict[str, Any]:
    return {**spec.to_json(), "source": spec.path.read_text(encoding="utf-8")}


def evaluate_payload(payload: dict[str, Any], settings_json: dict[str, Any]) -> dict[str, Any]:
    """The Ray task: the problem in a private workspace on this node, both phases, its outcome."""
    from kernelstitch.bench.phases import evaluate_problem
    from kernelstitch.bench.runner import PipelineRunner
    from kernelstitch.core.workspace import Workspace

    spec = ProblemSpec.from_json(payload)
    settings = BenchSettings.from_json(settings_json)
    with tempfile.TemporaryDirectory(prefix="ks_bench_") as tmp:
        path = Path(tmp) / spec.path.name
        path.write_text(payload["source"], encoding="utf-8")
        # each task prepares in its own process, so the share among problems preparing cannot
        # be seen here: the node's cores // --build-jobs, as before the share
        runner = PipelineRunner(Workspace(tmp), settings, cores=max(1, (os.cpu_count() or 1) // settings.build_jobs))
        outcome = evaluate_problem(runner, replace(spec, path=path), None, settings.time_limit_s)
    outcome.notes.append(f"measured on {platform.node()} (Ray)")
    return outcome.to_json()


def _failed(spec: ProblemSpec, status: str, message: str) -> ProblemOutcome:
    return ProblemOutcome(problem=spec.name, status=status, message=message, level=spec.level)


def run_on_ray(address: str, specs: list[ProblemSpec], settings: BenchSettings,
               on_event: OnEvent | None = None, stop: threading.Event | None = None,
               task: Task = evaluate_payload) -> list[ProblemOutcome]:
    """Outcomes in the order of `specs`; `task` is injectable for tests."""
    ray = import_ray()
    emit = on_event or (lambda _event: None)
    stop = stop or threading.Event()
    ray.init(address=address, ignore_reinit_error=True)
    try:
        remote = ray.remote(num_gpus=1, max_retries=0)(task)
        index_of = {}
        for index, spec in enumerate(specs):
            index_of[remote.remote(problem_payload(spec), settings.to_json())] = index
            emit(ScheduleEvent(spec.name, "prepare"))
        results: dict[int, ProblemOutcome] = {}
        pending = list(index_of)
        while pending:
            if stop.is_set():
                for ref in pending:
                    ray.cancel(ref, force=True)
                    spec = specs[index_of[ref]]
                    results[index_of[ref]] = _failed(spec, "cancelled", "cancelled (Ray)")
                break
            ready, pending = ray.wait(pending, num_returns=1, timeout=_POLL_S)
            for ref in ready:
                spec = specs[index_of[ref]]
                try:
                    outcome = ProblemOutcome.from_json(ray.get(ref))
                except Exception as exc:  # noqa: BLE001 - a lost node, a crashed task
                    # Not the problem's result (never stored): it runs again next time.
                    outcome = _failed(spec, "failed",
                                      f"{HARNESS_ERROR}: Ray task failed: {exc}"[:2000])
                outcome.problem, outcome.level = spec.name, spec.level
                results[index_of[ref]] = outcome
                emit(ScheduleEvent(spec.name, "done", None, outcome))
    finally:
        ray.shutdown()  # disconnects this driver; the cluster keeps running
    return [results[i] for i in range(len(specs))]
