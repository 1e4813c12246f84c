"""Roofline arithmetic and the per-device peak cache.

Peaks are measured once per device (tasks.measure_device_peaks: a large device-to-device copy
and large matmuls) and cached as JSON, so "x% of the achievable floor" compares against what
this GPU really reaches, not a datasheet.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kernelstitch.profiler.findings import DevicePeaks

CACHE_ENV = "KERNELSTITCH_CACHE_DIR"

# Used only when measuring fails; marked measured=False so reports say so.
FALLBACK_PEAKS = DevicePeaks(
    name="unknown (H100 SXM datasheet-like defaults)",
    dram_bytes_per_s=3.0e12,
    flops_per_s={"fp32": 5.0e13, "fp16": 7.5e14, "bf16": 7.5e14},
    sm_count=132,
    measured=False,
)


def cache_path(state_dir: Path | None = None) -> Path:
    if state_dir is not None:
        return Path(state_dir) / "device_peaks.json"
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "kernelstitch"
    return Path(root) / "device_peaks.json"


def peaks_from_measurement(result: dict[str, Any]) -> DevicePeaks:
    device = result.get("device", {})
    flops = {k[: -len("_flops_per_s")]: v for k, v in result.items() if k.endswith("_flops_per_s")}
    return DevicePeaks(
        name=device.get("name", "unknown"),
        dram_bytes_per_s=float(result["dram_bytes_per_s"]),
        flops_per_s=flops,
        sm_count=int(device.get("sm_count", 0)),
    )


def load_cached_peaks(device_name: str, path: Path) -> DevicePeaks | None:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    entry = entries.get(device_name) if isinstance(entries, dict) else None
    return DevicePeaks(**entry) if entry else None


def store_peaks(peaks: DevicePeaks, path: Path) -> None:
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        entries = {}
    entries[peaks.name] = peaks.__dict__
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries, indent=1))
    tmp.replace(path)  # atomic: parallel profiles never read half a file


def ridge_point(peaks: DevicePeaks, dtype: str | None) -> float:
    """FLOPs per byte above which a kernel is compute-bound on this device."""
    return peaks.peak_flops(dtype) / peaks.dram_bytes_per_s


def floor_seconds(bytes_moved: float, flops: float, peaks: DevicePeaks, dtype: str | None) -> float:
    """The roofline lower bound: the slower of moving the bytes and doing the math."""
    return max(bytes_moved / peaks.dram_bytes_per_s, flops / peaks.peak_flops(dtype))


def bound_of(bytes_moved: float, flops: float, peaks: DevicePeaks, dtype: str | None) -> str:
    if bytes_moved <= 0:
        return "compute"
    return "compute" if flops / bytes_moved >= ridge_point(peaks, dtype) else "memory"
