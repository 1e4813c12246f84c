"""Profile one module: run the backends, collect what they give, build the ProfileReport.

Torch-free: the torch.profiler run and the peak measurement happen in worker processes
(runner.run_task), ncu and nsys run as their own processes around `ncu_target`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from kernelstitch.profiler.analyze import Captured, build_report
from kernelstitch.profiler.findings import DevicePeaks, Finding, ProfileReport
from kernelstitch.profiler.ncu import NcuError, ncu_available, run_ncu
from kernelstitch.profiler.nsys import NsysError, run_nsys
from kernelstitch.profiler.roofline import (
    FALLBACK_PEAKS,
    cache_path,
    load_cached_peaks,
    peaks_from_measurement,
    store_peaks,
)
from kernelstitch.profiler.runner import TaskError, run_task
from kernelstitch.profiler.torch_trace import load_trace

BACKENDS = ("torch", "ncu", "nsys")
TASKS = "kernelstitch.profiler.tasks"


class NoGpuError(Exception):
    """No CUDA device where the worker runs."""


def device_peaks(device_name: str, state_dir: Path | None, notes: list[str]) -> DevicePeaks:
    path = cache_path(state_dir)
    cached = load_cached_peaks(device_name, path)
    if cached:
        return cached
    try:
        peaks = peaks_from_measurement(run_task(f"{TASKS}:measure_device_peaks", {}, 300))
    except TaskError as exc:
        notes.append(f"measuring device peaks failed ({exc}); using datasheet-like defaults")
        return FALLBACK_PEAKS
    try:
        store_peaks(peaks, path)
    except OSError as exc:
        notes.append(f"could not cache device peaks at {path}: {exc}")
    return peaks


def _unavailable(rule: str, message: str, explanation: str) -> Finding:
    return Finding(
        rule=rule, severity="info", message=message, explanation=explanation,
        suggestion="Run on a machine where the tool works for the metrics it adds.",
    )  # fmt: skip


def profile_module(
    path: Path,
    module: str | None = None,
    backends: tuple[str, ...] | list[str] = ("torch", "ncu"),
    work_dir: Path | None = None,
    state_dir: Path | None = None,
    timeout_s: float = 600.0,
) -> ProfileReport:
    path = Path(path).resolve()
    work = Path(work_dir or tempfile.mkdtemp(prefix="ks_profile_"))
    work.mkdir(parents=True, exist_ok=True)
    trace_path = work / "torch_trace.json"
    meta = run_task(
        f"{TASKS}:torch_profile",
        {"path": str(path), "module": module, "trace_path": str(trace_path)},
        timeout_s,
    )
    if "error" in meta:
        raise NoGpuError(meta["error"])
    (work / "torch_profile_meta.json").write_text(json.dumps(meta, indent=1))
    notes: list[str] = []
    extra: list[Finding] = []
    used = ["torch.profiler"]
    peaks = device_peaks(meta["device"]["name"], state_dir, notes)
    if not peaks.sm_count:
        peaks.sm_count = meta["device"].get("sm_count", 0)

    ncu_kernels = None
    if "ncu" in backends:
        if not ncu_available():
            extra.append(_unavailable(
                "ncu-unavailable", "Nsight Compute (ncu) not found: no hardware counters",
                "Occupancy, coalescing, L2, tensor-core and stall findings need ncu on PATH; "
                "times and roofline come from torch.profiler and tensor shapes.",
            ))  # fmt: skip
        else:
            try:
                run = run_ncu(path, module, work / "ncu", timeout_s=timeout_s)
                ncu_kernels = run.kernels
                used.append("ncu")
                if run.dropped_metrics:
                    notes.append(f"ncu does not know these metrics here: {run.dropped_metrics}")
            except (NcuError, OSError) as exc:
                notes.append(f"ncu failed: {exc}")
    if "nsys" in backends:
        try:
            run_nsys(path, module, work / "nsys", timeout_s=timeout_s)
            used.append("nsys")  # its summary agrees with torch.profiler's; the timeline is torch's
        except (NsysError, OSError) as exc:
            extra.append(_unavailable(
                "nsys-unavailable", "Nsight Systems unavailable: timeline from torch.profiler",
                f"nsys could not produce a report here ({exc}).",
            ))  # fmt: skip
    captured = Captured(
        meta=meta,
        trace=load_trace(trace_path),
        peaks=peaks,
        ncu_kernels=ncu_kernels,
        backends_used=used,
        notes=notes,
        extra_findings=extra,
    )
    return build_report(captured)
