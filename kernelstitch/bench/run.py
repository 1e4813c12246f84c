"""run_bench: find problems, reuse finished ones, run the rest (locally or on Ray), report."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.bench import resume
from kernelstitch.bench.metrics import set_bandwidth_fractions, summarise
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import ProblemRunner
from kernelstitch.bench.plots import write_plots
from kernelstitch.bench.problems import (
    BenchError,
    ProblemSpec,
    discover,
    published_baselines,
)
from kernelstitch.bench.report import (
    environment,
    portable_command,
    render_markdown,
    results_json,
    write_json,
)
from kernelstitch.bench.schedule import LocalScheduler, OnEvent, ScheduleEvent
from kernelstitch.bench.settings import (
    BenchSettings,
    check_llm_settings,
    compiler_fingerprint,
    resolve_devices,
    resume_key,
)
from kernelstitch.core.workspace import Workspace, find_workspace_root

GPU_INFO_TASK = "kernelstitch.bench.tasks:gpu_info"
PEAKS_TASK = "kernelstitch.profiler.tasks:measure_device_peaks"
PROBE_TIMEOUT_S = 120.0


@dataclass
class BenchRun:
    outcomes: list[ProblemOutcome]
    summary: dict[str, Any]
    out_dir: Path
    files: dict[str, Path]  # "json", "markdown", and the plots by file name
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False


def probe_gpus(notes: list[str]) -> dict[str, Any]:
    """torch/CUDA versions and visible GPU names, asked of a worker process."""
    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient() as worker:
        response = worker.call(GPU_INFO_TASK, timeout_s=PROBE_TIMEOUT_S)
    if response.ok and isinstance(response.result, dict):
        return response.result
    notes.append(f"could not query torch and the GPUs: {response.error}")
    return {"torch": None, "cuda": None, "names": []}


def measure_dram_bandwidth(device: int | None, notes: list[str]) -> float | None:
    """Bytes/s of the best of 10 device-to-device copies of 1 GiB (read + write), measured in a
    worker on `device` while nothing else runs on it."""
    from kernelstitch.core.worker.client import WorkerClient

    with WorkerClient(cuda_device=device) as worker:
        response = worker.call(PEAKS_TASK, timeout_s=PROBE_TIMEOUT_S)
    if response.ok and isinstance(response.result, dict):
        return response.result.get("dram_bytes_per_s")
    notes.append(f"could not measure the DRAM bandwidth of GPU {device} (no bandwidth fractions "
                 f"there): {response.error}")
    return None


def measure_dram_bandwidths(devices: list[int | None], notes: list[str],
                            measure=measure_dram_bandwidth) -> dict[str, float]:
    """Each measuring GPU's own DRAM bandwidth (issue 28: cards of one model differ by a few
    percent, and a problem's bandwidth fraction is against the card it ran on), all at once: each
    copy stays on its own card.  Keyed by the device as the outcomes' `gpu` names it ("None": the
    default device); a card whose measurement failed is left out."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, len(devices))) as pool:
        measured = list(pool.map(lambda d: measure(d, notes), devices))
    return {str(d): bw for d, bw in zip(devices, measured, strict=True) if bw}


def run_bench(
    directory: Path,
    out_dir: Path,
    settings: BenchSettings,
    *,
    levels: list[str] | None = None,
    only: list[str] | None = None,
    workspace_root: Path | None = None,
    command: str | None = None,
    runner: ProblemRunner | None = None,
    devices: list[int | None] | None = None,
    env: dict[str, Any] | None = None,
    on_event: OnEvent | None = None,
    log: Any = None,
    stop: threading.Event | None = None,
    resume_from: list[Path] | None = None,
) -> BenchRun:
    """Raises BenchError when the run cannot start.  `runner`, `devices` and `env` are
    injectable (tests); by default the pipeline runs on the visible GPUs."""
    specs = discover(Path(directory), levels, only)
    notes: list[str] = []
    check_llm_settings(settings)
    if settings.ray_address:
        from kernelstitch.bench.ray_backend import import_ray

        import_ray()  # fail before any work when ray is missing
    gpus = probe_gpus(notes) if env is None or devices is None else {}
    if devices is None and not settings.ray_address:
        devices = resolve_devices(settings.jobs, len(gpus.get("names") or []),
                                  os.environ.get("CUDA_VISIBLE_DEVICES"))
    stop = stop or threading.Event()
    emit = on_event or (lambda _event: None)
    env = env if env is not None else environment(devices, gpus)
    if settings.ray_address:
        env = {**env, "ray_address": settings.ray_address}
    elif runner is None and gpus.get("names") and devices:
        by_gpu = measure_dram_bandwidths(devices, notes)
        env = {**env, "dram_bytes_per_s": by_gpu.get(str(devices[0])) or min(by_gpu.values(), default=None),
               "dram_bytes_per_s_by_gpu": by_gpu}
    workspace = Workspace(workspace_root or find_workspace_root(Path(directory).resolve()))
    store = workspace.runstore()
    if settings.ray_address:
        from kernelstitch.bench.ray_backend import resume_label

        label = resume_label(settings.ray_address, list(gpus.get("names") or []))
    else:
        label = str(env.get("device"))
    fingerprint = compiler_fingerprint()
    keys = {s.name: resume_key(s, settings, label, fingerprint) for s in specs}

    results: dict[str, ProblemOutcome] = {}
    try:
        earlier = resume.load_results(list(resume_from or []))
    except resume.ResultsFileError as exc:
        raise BenchError(str(exc)) from None
    if not settings.rerun:
        for spec in specs:
            stored = resume.lookup(store, keys[spec.name], settings.time_limit_s, earlier)
            if stored is not None:
                stored.problem, stored.level = spec.name, spec.level
                results[spec.name] = stored
                emit(ScheduleEvent(spec.name, "done", stored.gpu, stored))
    todo = [s for s in specs if s.name not in results]
    by_name: dict[str, ProblemSpec] = {s.name: s for s in specs}

    def on_done(event: ScheduleEvent) -> None:
        if event.phase == "done" and event.outcome is not None:
            try:  # saved at once: an interrupted run keeps what finished
                resume.record(store, by_name[event.problem], keys[event.problem], event.outcome)
            except Exception as exc:  # noqa: BLE001 - the report still has it
                notes.append(f"{event.problem}: not saved to the run store ({exc})")
        emit(event)

    if todo:
        if settings.ray_address:
            from kernelstitch.bench.ray_backend import run_on_ray

            ran = run_on_ray(settings.ray_address, todo, settings, on_done, stop)
        else:
            if runner is None:
                from kernelstitch.bench.runner import PipelineRunner

                runner = PipelineRunner(workspace, settings, log)
            assert devices is not None
            ran = LocalScheduler(runner, devices, settings.build_jobs, settings.time_limit_s,
                                 on_done, stop).run(todo)
        results.update({o.problem: o for o in ran})
    outcomes = [results[s.name] for s in specs]
    for spec, outcome in zip(specs, outcomes):
        outcome.resume_key = keys[spec.name]
    set_bandwidth_fractions(outcomes, env.get("dram_bytes_per_s"), env.get("dram_bytes_per_s_by_gpu"))
    env = {**env, **set_published_baselines(outcomes, published_baselines(specs))}
    summary = summarise(outcomes)
    command = portable_command(command or f"kernelstitch bench {directory}")
    files = write_reports(Path(out_dir), outcomes, summary, env, command, settings, notes)
    return BenchRun(outcomes, summary, Path(out_dir), files, notes, stop.is_set())


def set_published_baselines(outcomes: list[ProblemOutcome],
                            baselines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each outcome's published KernelBench times (None where there are none, reused outcomes
    included); returns what the environment should say about them ({} without any)."""
    for o in outcomes:
        row = baselines.get(o.problem, {})
        o.published_eager_ms, o.published_compiled_ms = row.get("eager_ms"), row.get("compiled_ms")
    hardware = sorted({str(r.get("hardware")) for r in baselines.values() if r.get("hardware")})
    if not baselines:
        return {}
    return {"published_baselines": {
        "source": "KernelBench baseline_H100_Modal (mean of 100 trials)",
        "hardware": ", ".join(hardware) or None, "problems": len(baselines)}}


def write_reports(out_dir: Path, outcomes: list[ProblemOutcome], summary: dict[str, Any],
                  env: dict[str, Any], command: str, settings: BenchSettings,
                  notes: list[str]) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots, note = write_plots(outcomes, out_dir)
    if note:
        notes.append(note)
    files = {p.name: p for p in plots}
    data = results_json(outcomes, summary, env, command, settings.to_json(),
                        [p.name for p in plots], notes)
    files["json"] = write_json(out_dir / "results.json", data)
    markdown = render_markdown(outcomes, summary, env, command, settings.precision)
    if plots:
        markdown += "\n" + "".join(f"![{p.stem}]({p.name})\n" for p in plots)
    if notes:
        markdown += "\n" + "".join(f"- note: {n}\n" for n in notes)
    files["markdown"] = out_dir / "results.md"
    files["markdown"].write_text(markdown, encoding="utf-8")
    return files


__all__ = ["BenchError", "BenchRun", "run_bench", "write_reports"]
