"""A fake per-problem runner for the bench harness tests: records when each phase ran where."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import PhaseContext, Prepared
from kernelstitch.bench.problems import ProblemSpec


@dataclass
class Behaviour:
    prepare_s: float = 0.02
    measure_s: float = 0.02
    status: str = "accepted"
    speedup: float | None = 1.5
    speedup_compiled: float | None = 1.1
    build_fails: bool = False
    hang_in: str | None = None  # "prepare" / "measure": block until cancelled
    raise_in: str | None = None


@dataclass
class Interval:
    problem: str
    device: int | None
    start: float
    end: float
    cancelled: bool = False


@dataclass
class FakeRunner:
    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    default: Behaviour = field(default_factory=Behaviour)
    prepares: list[Interval] = field(default_factory=list)
    measures: list[Interval] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    measure_started: threading.Event = field(default_factory=threading.Event)

    def _behaviour(self, spec: ProblemSpec) -> Behaviour:
        return self.behaviours.get(spec.name, self.default)

    def _phase(self, phase: str, spec: ProblemSpec, ctx: PhaseContext, seconds: float,
               intervals: list[Interval]) -> Behaviour:
        """Raise, or sleep (block when the behaviour hangs here) unless cancelled, and record
        the interval."""
        b = self._behaviour(spec)
        start = time.monotonic()
        if b.raise_in == phase:
            raise RuntimeError(f"fake {phase} bug")
        cancelled = ctx.cancel.wait(30.0 if b.hang_in == phase else seconds)
        with self.lock:
            intervals.append(Interval(spec.name, ctx.device, start, time.monotonic(), cancelled))
        return b

    def prepare(self, spec: ProblemSpec, ctx: PhaseContext) -> Prepared:
        b = self._phase("prepare", spec, ctx, self._behaviour(spec).prepare_s, self.prepares)
        if b.build_fails:
            return Prepared(spec, compiled=False, plan_steps=["fused"], done=ProblemOutcome(
                problem=spec.name, status="rejected", message="compilation failed: x",
                reasons=["compile_error"], compiled=False, compile_message="error: x"))
        return Prepared(spec, candidate_path=str(Path("/nonexistent/model_new.py")),
                        plan_steps=["fused_elementwise"], compiled=True)

    def measure(self, prepared: Prepared, ctx: PhaseContext) -> ProblemOutcome:
        spec = prepared.spec
        self.measure_started.set()
        b = self._phase("measure", spec, ctx, self._behaviour(spec).measure_s, self.measures)
        # Like the real Verifier's verdicts, a non-accepted one may still carry timings: the
        # harness must not report them.
        return ProblemOutcome(
            problem=spec.name, status=b.status, message=f"fake {b.status}",
            eager_ms=1.0, compiled_ms=0.8, candidate_ms=1.0 / b.speedup if b.speedup else None,
            eager_spread_ms=[0.9, 1.1], speedup_vs_eager=b.speedup,
            speedup_vs_compiled=b.speedup_compiled, device="Fake GPU",
        )


def max_overlap(intervals: list[Interval]) -> int:
    """Largest number of intervals running at the same moment."""
    points = sorted([(i.start, 1) for i in intervals] + [(i.end, -1) for i in intervals],
                    key=lambda p: (p[0], p[1]))
    best = current = 0
    for _, delta in points:
        current += delta
        best = max(best, current)
    return best


def write_problem(path: Path, scale: float = 2.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        return torch.relu(x * {scale})\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    return path


def spec_for(path: Path, name: str | None = None, level: str | None = None) -> ProblemSpec:
    import hashlib

    return ProblemSpec(name=name or path.stem, path=path, level=level,
                       sha256=hashlib.sha256(path.read_bytes()).hexdigest())
