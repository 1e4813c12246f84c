"""Run problems on this host: `build_jobs` prepares at once, one measurement per GPU at a time.

Prepares (CPU: capture, codegen, nvcc) run in a thread pool; each GPU has one thread that takes
prepared problems from a queue and measures them one after the other, so two timings never
share a GPU.  Preparing goes on while GPUs measure, so nvcc time overlaps GPU time.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import (
    Budget,
    Prepared,
    ProblemRunner,
    measure_phase,
    prepare_phase,
)
from kernelstitch.bench.problems import ProblemSpec

Phase = Literal["prepare", "measure", "done"]


@dataclass(frozen=True)
class ScheduleEvent:
    problem: str
    phase: Phase  # "prepare"/"measure": started; "done": outcome is set
    device: int | None = None
    outcome: ProblemOutcome | None = None


OnEvent = Callable[[ScheduleEvent], None]


class LocalScheduler:
    def __init__(self, runner: ProblemRunner, devices: list[int | None], build_jobs: int,
                 time_limit_s: float, on_event: OnEvent | None = None,
                 stop: threading.Event | None = None) -> None:
        if not devices:
            raise ValueError("at least one device slot is needed")
        self.runner = runner
        self.devices = list(devices)
        self.build_jobs = build_jobs
        self.time_limit_s = time_limit_s
        self.stop = stop or threading.Event()
        self._on_event = on_event or (lambda _event: None)
        self._ready: queue.Queue[tuple[int, Prepared, Budget] | None] = queue.Queue()
        self._results: dict[int, ProblemOutcome] = {}
        self._lock = threading.Lock()

    def _emit(self, event: ScheduleEvent) -> None:
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001, S110 - a broken display must not stop the run
            pass

    def _done(self, index: int, outcome: ProblemOutcome) -> None:
        with self._lock:
            self._results[index] = outcome
        self._emit(ScheduleEvent(outcome.problem, "done", outcome.gpu, outcome))

    def _prepare(self, index: int, spec: ProblemSpec) -> None:
        # Builds need a visible GPU for the target architecture: spread them over the GPUs.
        device = self.devices[index % len(self.devices)]
        budget = Budget(self.time_limit_s, self.stop)
        self._emit(ScheduleEvent(spec.name, "prepare", device))
        prepared = prepare_phase(self.runner, spec, budget, device)
        if prepared.done is not None:
            self._done(index, prepared.done)
        else:
            self._ready.put((index, prepared, budget))

    def _measure_loop(self, device: int | None) -> None:
        while True:
            item = self._ready.get()
            if item is None:
                return
            index, prepared, budget = item
            self._emit(ScheduleEvent(prepared.spec.name, "measure", device))
            self._done(index, measure_phase(self.runner, prepared, budget, device))

    def run(self, specs: list[ProblemSpec]) -> list[ProblemOutcome]:
        """Outcomes in the order of `specs`."""
        gpu_threads = [
            threading.Thread(target=self._measure_loop, args=(device,),
                             name=f"bench-gpu-{device}", daemon=True)
            for device in self.devices
        ]
        for thread in gpu_threads:
            thread.start()
        try:
            with ThreadPoolExecutor(self.build_jobs, thread_name_prefix="bench-prepare") as pool:
                for future in [pool.submit(self._prepare, i, s) for i, s in enumerate(specs)]:
                    future.result()
        finally:
            for _ in gpu_threads:
                self._ready.put(None)  # after every prepared problem: FIFO
            for thread in gpu_threads:
                thread.join()
        return [self._results[i] for i in range(len(specs))]
