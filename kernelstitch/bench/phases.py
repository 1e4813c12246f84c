"""A problem's two phases under its time limit, and the runner interface they call.

prepare (capture, plan, code, pre-build the extension: CPU-bound, many at once) and measure
(verify + timing [+ profile]: one problem per GPU at a time).  The limit covers both phases;
time spent queued for a GPU does not count.  When it runs out the phase's cancel Event is set,
the runner stops its worker processes, and the problem is recorded as 'timeout'.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.problems import ProblemSpec

T = TypeVar("T")
HARNESS_ERROR = "harness error"  # a bug or hiccup of ours, not the problem's result


@dataclass(frozen=True)
class PhaseContext:
    device: int | None  # GPU index for the worker processes (None: the default device)
    cancel: threading.Event  # set on time-out or Ctrl-C: stop and return soon
    time_left_s: float  # for worker-call timeouts; the Event is what enforces the limit


@dataclass
class Prepared:
    spec: ProblemSpec
    candidate_path: str | None = None
    plan_steps: list[str] = field(default_factory=list)
    plan_bytes: int | None = None  # outcome.memory_bound_bytes of the plan
    compiled: bool | None = None
    done: ProblemOutcome | None = None  # set when there is nothing to measure (failure)
    generate_on_gpu: bool = False  # coders that verify while generating run it in measure
    notes: list[str] = field(default_factory=list)
    prepare_s: float | None = None
    prepare_stage_s: dict[str, float] = field(default_factory=dict)  # see ProblemOutcome

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"] = self.spec.to_json()
        data["done"] = self.done.to_json() if self.done else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prepared:
        done = data.get("done")
        return cls(**{**data, "spec": ProblemSpec.from_json(data["spec"]),
                      "done": ProblemOutcome.from_json(done) if done else None})


class ProblemRunner(Protocol):
    """What the scheduler calls; tests inject fakes.  Both methods must honour ctx.cancel."""

    def prepare(self, spec: ProblemSpec, ctx: PhaseContext) -> Prepared: ...

    def measure(self, prepared: Prepared, ctx: PhaseContext) -> ProblemOutcome: ...


class Budget:
    """One problem's time limit, spent across phases; `stop` (Ctrl-C) cancels it too."""

    _POLL_S = 0.05

    def __init__(self, limit_s: float, stop: threading.Event | None = None) -> None:
        self.limit_s = limit_s
        self.used_s = 0.0
        self.cancel = threading.Event()
        self.expired = False
        self._stop = stop
        if stop is not None and stop.is_set():
            self.cancel.set()

    def remaining(self) -> float:
        return self.limit_s - self.used_s

    @property
    def interrupted(self) -> bool:
        return self.cancel.is_set()

    def run(self, fn: Callable[[threading.Event, float], T]) -> tuple[T | None, float]:
        """fn(cancel, time_left_s) while a watcher sets cancel at the limit or on stop."""
        left = self.remaining()
        if left <= 0:
            self.expired = True
            self.cancel.set()
        if self._stop is not None and self._stop.is_set():
            self.cancel.set()
        if self.cancel.is_set():
            return None, 0.0
        start = time.monotonic()
        finished = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(start + left, finished),
                                   name="bench-time-limit", daemon=True)
        watcher.start()
        try:
            return fn(self.cancel, left), time.monotonic() - start
        finally:
            finished.set()
            watcher.join()
            self.used_s += time.monotonic() - start

    def _watch(self, deadline: float, finished: threading.Event) -> None:
        while not finished.wait(min(self._POLL_S, max(deadline - time.monotonic(), 0))):
            if self._stop is not None and self._stop.is_set():
                self.cancel.set()
                return
            if time.monotonic() >= deadline:
                self.expired = True
                self.cancel.set()
                return


def _harness_error(spec: ProblemSpec, exc: BaseException) -> ProblemOutcome:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]
    return ProblemOutcome(problem=spec.name, status="failed", level=spec.level,
                          message=f"{HARNESS_ERROR}: {type(exc).__name__}: {exc}", notes=[tail])


def _interrupted(spec: ProblemSpec, budget: Budget, phase: str,
                 partial: ProblemOutcome | None = None) -> ProblemOutcome:
    outcome = partial or ProblemOutcome(problem=spec.name, status="failed", message="")
    outcome.reasons = []  # whatever the cancelled workers reported is not the problem's
    if budget.expired:
        outcome.status = "timeout"
        outcome.message = f"over the {budget.limit_s:g} s time limit during {phase}; cancelled"
    else:
        outcome.status = "cancelled"
        outcome.message = f"cancelled during {phase}"
    return outcome


def prepare_phase(runner: ProblemRunner, spec: ProblemSpec, budget: Budget,
                  device: int | None) -> Prepared:
    """Prepared for measuring, or with `done` set (failure, time-out, cancel)."""
    try:
        prepared, seconds = budget.run(
            lambda cancel, left: runner.prepare(spec, PhaseContext(device, cancel, left)))
    except Exception as exc:  # noqa: BLE001 - one problem's bug must not stop the benchmark
        prepared, seconds = Prepared(spec, done=_harness_error(spec, exc)), None
    if budget.interrupted:  # whatever it returned or raised, it ran out of time / was stopped
        partial = prepared.done if prepared else None
        prepared = prepared or Prepared(spec)
        prepared.done = _interrupted(spec, budget, "prepare", partial)
    assert prepared is not None
    prepared.prepare_s = seconds
    if prepared.done is not None:
        _finish(prepared.done, spec, prepared, budget)
        prepared.done.prepare_s = seconds
        prepared.done.prepare_stage_s = dict(prepared.prepare_stage_s)
    return prepared


def measure_phase(runner: ProblemRunner, prepared: Prepared, budget: Budget,
                  device: int | None) -> ProblemOutcome:
    spec = prepared.spec
    try:
        outcome, seconds = budget.run(
            lambda cancel, left: runner.measure(prepared, PhaseContext(device, cancel, left)))
    except Exception as exc:  # noqa: BLE001
        outcome, seconds = _harness_error(spec, exc), 0.0
    if budget.interrupted:
        outcome = _interrupted(spec, budget, "measure", outcome)
    assert outcome is not None
    outcome.gpu = device
    outcome.measure_s = seconds
    outcome.prepare_s = prepared.prepare_s
    outcome.prepare_stage_s = dict(prepared.prepare_stage_s)
    _finish(outcome, spec, prepared, budget)
    return outcome


def _finish(outcome: ProblemOutcome, spec: ProblemSpec, prepared: Prepared,
            budget: Budget) -> None:
    outcome.drop_measurements_unless_accepted()  # e.g. a timeout after the verdict came back
    outcome.problem = spec.name
    outcome.level = spec.level
    outcome.time_limit_s = budget.limit_s
    if not outcome.plan_steps:
        outcome.plan_steps = list(prepared.plan_steps)
    if outcome.plan_bytes is None:
        outcome.plan_bytes = prepared.plan_bytes
    if outcome.compiled is None:
        outcome.compiled = prepared.compiled
    outcome.notes = list(dict.fromkeys(prepared.notes + outcome.notes))


def evaluate_problem(runner: ProblemRunner, spec: ProblemSpec, device: int | None,
                     time_limit_s: float, stop: threading.Event | None = None) -> ProblemOutcome:
    """Both phases back to back: what one Ray task (or any single-slot executor) runs."""
    budget = Budget(time_limit_s, stop)
    prepared = prepare_phase(runner, spec, budget, device)
    if prepared.done is not None:
        return prepared.done
    return measure_phase(runner, prepared, budget, device)
