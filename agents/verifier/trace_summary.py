"""Read a torch.profiler chrome trace of profiled forward calls (torch-free).

The candidate worker wraps each profiled call in `record_function("ks_verify_call_<i>")`.  For
each call this finds the GPU kernels it launched (kernel -> correlation id -> the runtime launch
on the CPU inside the call's range) and the aten ops dispatched inside it, each with the chain of
enclosing aten ops (so work nested inside a declared library call is not blamed on the
candidate).

A vendor library kernel (cuBLAS, cuDNN...) whose launch lies inside no dispatched op (aten::, or
another library's registered op such as flash_attn::) was launched by the candidate's own native
code calling the library directly (its cuBLASLt GEMM): PyTorch's own library calls run inside an
aten op (aten::mm, aten::convolution), whether Python or C++ dispatched them.  Ways around the
dispatcher's profiling are static rules (hides_torch_ops), and the credit also needs the
candidate's source to call the library (assemble.py).  Kernels replayed from a CUDA graph are not counted that way: a graph could
have captured a PyTorch call; nor are PyTorch's own or compiler-generated kernels (Inductor's
Triton kernels launch from generated Python, outside aten ops).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kernelstitch.agents.verifier.op_names import (
    canonical_op,
    is_compute_op,
    is_own_kernel,
    is_vendor_library_kernel,
    op_families,
)

CALL_RANGE = re.compile(r"^ks_verify_call_(\d+)$")
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
GRAPH_LAUNCH = "GraphLaunch"  # cudaGraphLaunch / cuGraphLaunch


@dataclass
class CallProfile:
    index: int
    kernels: list[str] = field(default_factory=list)
    streams: list[int] = field(default_factory=list)
    ops: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (op, ancestors)
    # Library kernels launched directly by the candidate's code (outside every aten op).
    library_calls: list[str] = field(default_factory=list)
    # GPU microseconds of each kernel name in this call (launches summed)
    kernel_us: dict[str, float] = field(default_factory=dict)

    @property
    def own_kernels(self) -> list[str]:
        return [k for k in self.kernels if is_own_kernel(k)]


def _inside(event: dict[str, Any], outer: dict[str, Any]) -> bool:
    start, end = outer["ts"], outer["ts"] + outer.get("dur", 0)
    return event.get("tid") == outer.get("tid") and start <= event["ts"] <= end


def summarize_trace(trace: dict[str, Any]) -> list[CallProfile]:
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]
    ranges = []
    for e in events:
        match = CALL_RANGE.match(str(e.get("name", "")))
        if match and e.get("cat") in ("user_annotation", "cpu_op", "python_function"):
            ranges.append((int(match.group(1)), e))
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    dispatched = [e for e in events if e.get("cat") == "cpu_op"]  # aten::, and other libraries' ops
    ops = [e for e in dispatched if str(e.get("name", "")).startswith("aten::")]
    calls = []
    for index, rng in sorted(ranges, key=lambda item: item[0]):
        call = CallProfile(index)
        inside = sorted((o for o in ops if _inside(o, rng)), key=lambda o: (o["ts"], -o["dur"]))
        enclosing = [o for o in dispatched if _inside(o, rng)]
        for k in kernels:
            launch = launches.get(k.get("args", {}).get("correlation"))
            if launch is not None and _inside(launch, rng):
                name = str(k.get("name", ""))
                call.kernels.append(name)
                call.kernel_us[name] = call.kernel_us.get(name, 0.0) + float(k.get("dur", 0.0))
                call.streams.append(int(k.get("args", {}).get("stream", -1)))
                if (is_vendor_library_kernel(name) and GRAPH_LAUNCH not in str(launch.get("name", ""))
                        and not any(_inside(launch, op) for op in enclosing)):
                    call.library_calls.append(name)
        for op in inside:
            ancestors = tuple(str(p["name"]) for p in inside
                              if p is not op and p["ts"] <= op["ts"]
                              and op["ts"] + op.get("dur", 0) <= p["ts"] + p.get("dur", 0))
            call.ops.append((str(op["name"]), ancestors))
        calls.append(call)
    return calls


def reused_reference_ops(calls: list[CallProfile], reference_ops: set[str],
                         excused_ops: dict[str, str]) -> list[str]:
    """Compute ops the candidate dispatched that the reference also runs, or that compute the
    same function class (op_names: canonical names and families, as the static rule: a relu
    dispatched as aten::clamp_min, a linear as aten::addmm), unless excused (`excused_ops`: the
    trusted declaration's and the caller's allowance, exactly those ops by canonical name) or
    nested inside an excused op (cuDNN's own ops inside aten::conv2d)."""
    excused = {canonical_op(k) for k in excused_ops}
    related: set[str] = set()
    for op in reference_ops:
        if is_compute_op(op):
            related |= op_families(op)
    found: list[str] = []
    for call in calls:
        for op, ancestors in call.ops:
            name = canonical_op(op)
            if not is_compute_op(op) or not is_compute_op(name) or name not in related:
                continue
            if name in excused or any(canonical_op(a) in excused for a in ancestors):
                continue
            if op not in found:
                found.append(op)
    return found


def kernel_durations(trace: dict[str, Any]) -> dict[str, float]:
    """Milliseconds of GPU time per kernel name over the whole trace (the search's profile of
    its fastest variant: which kernels a next round should vary)."""
    totals: dict[str, float] = {}
    for e in trace.get("traceEvents", []):
        if e.get("ph") == "X" and e.get("cat") == "kernel":
            name = str(e.get("name", ""))
            totals[name] = totals.get(name, 0.0) + float(e.get("dur", 0.0)) / 1e3
    return totals
