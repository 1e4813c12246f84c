"""Parse a torch.profiler chrome trace into per-kernel records tied to our `ks:op` ranges.

Chain: GPU kernel --correlation--> the CUDA runtime/driver launch call on a CPU thread --time
containment--> the innermost `ks:op<N>:L<line>` user annotation (see oplog.py) and the innermost
aten cpu_op.  Torch-free: runs in the parent process and in tests on captured traces.
"""

from __future__ import annotations

import gzip
import json
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelstitch.profiler.oplog import parse_range_name

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}


@dataclass
class TraceKernel:
    name: str
    category: str  # kernel | gpu_memcpy | gpu_memset
    ts_us: float
    dur_us: float
    correlation: int | None
    launch_ts_us: float | None
    launch_dur_us: float | None
    op_index: int | None
    line: int | None
    aten_op: str | None
    grid: list[int] | None
    block: list[int] | None
    registers: int | None
    shared_mem: int | None


def load_trace(path: Path) -> dict[str, Any]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


class _Intervals:
    """Intervals on one thread; innermost(ts) = the latest-starting one that contains ts."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = sorted(events, key=lambda e: e["ts"])
        self.starts = [e["ts"] for e in self.events]

    def innermost(self, ts: float) -> dict[str, Any] | None:
        i = bisect_right(self.starts, ts)
        for event in reversed(self.events[:i]):
            if event["ts"] + event.get("dur", 0) >= ts:
                return (
                    event  # sorted by start: the first containing one from the right is innermost
                )
        return None


def _by_thread(events: list[dict[str, Any]]) -> dict[Any, _Intervals]:
    grouped: dict[Any, list[dict[str, Any]]] = {}
    for e in events:
        grouped.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    return {k: _Intervals(v) for k, v in grouped.items()}


def parse_trace(trace: dict[str, Any]) -> list[TraceKernel]:
    """All GPU activities of the trace in time order, each tied to its launching op range."""
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})
    }
    annotations = _by_thread(
        [e for e in events if e.get("cat") == "user_annotation" and parse_range_name(e["name"])]
    )
    cpu_ops = _by_thread([e for e in events if e.get("cat") == "cpu_op"])
    kernels = []
    for e in sorted((e for e in events if e.get("cat") in GPU_CATEGORIES), key=lambda e: e["ts"]):
        args = e.get("args", {})
        corr = args.get("correlation")
        launch = launches.get(corr)
        op_index = line = aten = None
        if launch is not None:
            key = (launch.get("pid"), launch.get("tid"))
            ann = annotations[key].innermost(launch["ts"]) if key in annotations else None
            if ann is not None:
                op_index, line = parse_range_name(ann["name"])  # type: ignore[misc]
            op = cpu_ops[key].innermost(launch["ts"]) if key in cpu_ops else None
            aten = op["name"] if op is not None else None
        kernels.append(
            TraceKernel(
                name=e["name"],
                category=e["cat"],
                ts_us=float(e["ts"]),
                dur_us=float(e.get("dur", 0.0)),
                correlation=corr,
                launch_ts_us=float(launch["ts"]) if launch else None,
                launch_dur_us=float(launch.get("dur", 0.0)) if launch else None,
                op_index=op_index,
                line=line,
                aten_op=aten,
                grid=args.get("grid"),
                block=args.get("block"),
                registers=args.get("registers per thread"),
                shared_mem=args.get("shared memory"),
            )
        )
    return kernels


@dataclass
class TimelineStats:
    """Host/GPU overlap inside the profiled region (inflated by the profiler's own overhead)."""

    kernels: int
    gpu_busy_us: float
    span_us: float  # first kernel start to last kernel end
    idle_gap_us: float  # GPU idle time between kernels
    mean_launch_us: float  # CPU time per launch call


def timeline_stats(kernels: list[TraceKernel]) -> TimelineStats:
    if not kernels:
        return TimelineStats(0, 0.0, 0.0, 0.0, 0.0)
    ordered = sorted(kernels, key=lambda k: k.ts_us)
    busy = sum(k.dur_us for k in ordered)
    span = max(k.ts_us + k.dur_us for k in ordered) - ordered[0].ts_us
    idle = 0.0
    end = ordered[0].ts_us
    for k in ordered:
        idle += max(0.0, k.ts_us - end)
        end = max(end, k.ts_us + k.dur_us)
    launch = [k.launch_dur_us for k in ordered if k.launch_dur_us is not None]
    return TimelineStats(
        kernels=len(ordered),
        gpu_busy_us=busy,
        span_us=span,
        idle_gap_us=idle,
        mean_launch_us=sum(launch) / len(launch) if launch else 0.0,
    )
