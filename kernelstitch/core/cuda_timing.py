"""CUDA-event timing shared by the verifier, the profiler and the bench scripts.

`bind_cuda()` binds `torch.cuda.Event`, its `record`, `elapsed_time` and `synchronize`,
`torch.cuda.synchronize` and `time.perf_counter` at the moment it is called; a `CudaTimer` uses
only those.  The verifier binds them when agents/verifier/timing.py is imported, before any
candidate code runs, so a candidate that later patches any of them does not change what is
measured (and agents/verifier/tamper.py reports the patch).

One timed span (`CudaTimer.span`): optional flush, synchronise the whole device (every span
starts on an idle GPU), record a start event on the current stream, call `fn` `repeat` times,
record an end event, synchronise the end event, then the whole device: the time that last
synchronisation still takes is work the events did not see (a side stream, a deferred launch).

torch is imported only inside `bind_cuda()`: importing this module stays torch-free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple


class BoundCuda(NamedTuple):
    """The callables a CudaTimer uses, bound once."""

    event: Callable[..., Any]  # torch.cuda.Event
    record: Callable[..., Any]  # torch.cuda.Event.record (unbound: record(event))
    elapsed: Callable[[Any, Any], float]  # torch.cuda.Event.elapsed_time(start, end), ms
    event_sync: Callable[[Any], Any]  # torch.cuda.Event.synchronize(event)
    device_sync: Callable[[], Any]  # torch.cuda.synchronize
    now: Callable[[], float]  # time.perf_counter


def bind_cuda() -> BoundCuda:
    """The torch.cuda event and synchronisation functions as they are now."""
    import torch

    return BoundCuda(
        event=torch.cuda.Event, record=torch.cuda.Event.record,
        elapsed=torch.cuda.Event.elapsed_time, event_sync=torch.cuda.Event.synchronize,
        device_sync=torch.cuda.synchronize, now=time.perf_counter,
    )


@dataclass(frozen=True)
class Span:
    gpu_ms: float  # between the start and the end event, per call
    wall_ms: float  # host time from just before the start event to the device being idle, per call
    unaccounted_ms: float  # the device-wide synchronisation after the end event was done


class CudaTimer:
    """Times calls with one pair of CUDA events (reused: each span synchronises its end event
    before the next records again).  `bound` defaults to the functions bound now."""

    def __init__(self, bound: BoundCuda | None = None) -> None:
        self.bound = bound if bound is not None else bind_cuda()
        self._start = self.bound.event(enable_timing=True)
        self._end = self.bound.event(enable_timing=True)

    def synchronize(self) -> None:
        self.bound.device_sync()

    def span(self, fn: Callable[..., Any], *args: Any, repeat: int = 1,
             flush: Callable[[], Any] | None = None) -> Span:
        """Time `fn(*args)` called `repeat` times back to back; its outputs are dropped after
        the measurement."""
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {repeat}")
        b = self.bound
        if flush is not None:
            flush()
        b.device_sync()  # every span starts on an idle GPU: hidden work shows up afterwards
        t_start = b.now()
        b.record(self._start)
        for _ in range(repeat):
            out = fn(*args)
        b.record(self._end)
        b.event_sync(self._end)
        t_end = b.now()
        b.device_sync()
        t_idle = b.now()
        gpu_ms = b.elapsed(self._start, self._end)
        del out
        return Span(gpu_ms=gpu_ms / repeat, wall_ms=(t_idle - t_start) * 1e3 / repeat,
                    unaccounted_ms=(t_idle - t_end) * 1e3)

    def samples_ms(self, fn: Callable[..., Any], *args: Any, runs: int, warmup: int = 3,
                   flush: Callable[[], Any] | None = None) -> list[float]:
        """`warmup` untimed calls, a device synchronisation, then the GPU time of `runs` spans
        of one call each (the caller picks the statistic: median, min)."""
        for _ in range(warmup):
            fn(*args)
        self.synchronize()
        return [self.span(fn, *args, flush=flush).gpu_ms for _ in range(runs)]
