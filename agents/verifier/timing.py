"""GPU timing with CUDA events on the current stream, honest about what it measures.

Warm-up: synchronised calls for at least 50 ms (and 3 calls); their mean sets how many timed
runs fill the time budget (at least `min_runs`).  Per run: flush L2 (write a buffer twice the L2
size), rotate to the next input set, wait for an idle device, record a start event, call, record
an end event.  After each run the end event is synchronised and then the whole device:
the time that device-wide synchronisation still takes is work the events did not see (a side
stream, a deferred launch); its median is reported as `unaccounted_ms`.

The event and synchronisation functions are bound when this module is imported, before any
candidate code runs, so a candidate that patches `torch.cuda.Event` or `time.perf_counter`
does not change what is measured (and the tamper check reports the patch).  The timed span
itself is kernelstitch.core.cuda_timing's, which the profiler and the bench scripts use too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelstitch.core.cuda_timing import CudaTimer, bind_cuda

_CUDA = bind_cuda()  # at import: before any candidate code runs
_device_sync = _CUDA.device_sync
_now = _CUDA.now

WARMUP_MIN_RUNS = 3
WARMUP_S = 0.05


@dataclass
class TimingResult:
    samples_ms: list[float] = field(default_factory=list)
    unaccounted_ms: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"samples_ms": self.samples_ms, "unaccounted_ms": self.unaccounted_ms}


class L2Flusher:
    def __init__(self, device: torch.device) -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 2**20)
        self.buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self.buffer.fill_(1)


def time_function(fn: Callable[[list[Any]], Any], input_sets: list[list[Any]],
                  flush: L2Flusher, min_runs: int = 30, budget_s: float = 2.0,
                  max_runs: int = 2000) -> TimingResult:
    """Time `fn(inputs)` over rotated input sets; outputs are dropped after each run."""
    warm_start = _now()
    runs = 0
    while runs < WARMUP_MIN_RUNS or (_now() - warm_start) < WARMUP_S:
        fn(input_sets[runs % len(input_sets)])
        # Synchronised per run: unsynchronised, 50 ms of host time queued hundreds of 40 ms
        # GEMM calls (an 18 s warm-up on an H100) and the run count was set from the backlog.
        _device_sync()
        runs += 1
    per_run_s = max((_now() - warm_start) / runs, 1e-6)
    target = int(min(max(min_runs, budget_s / per_run_s), max_runs))
    result = TimingResult()
    timer = CudaTimer(_CUDA)
    for i in range(target):
        # flush, idle device, events around one call, then the device-wide sync's leftover
        span = timer.span(fn, input_sets[i % len(input_sets)], flush=flush)
        result.unaccounted_ms.append(span.unaccounted_ms)
        result.samples_ms.append(span.gpu_ms)
    return result
