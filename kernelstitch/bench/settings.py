"""The bench run's settings, the GPUs it uses, and the resume key of a problem."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.bench.problems import BenchError, ProblemSpec
from kernelstitch.core.fingerprint import package_root, tree_fingerprint
from kernelstitch.core.precision import PrecisionError, precision_mode

HARNESS_VERSION = 1  # bump when the stored outcome's meaning changes: old results re-run
DEFAULT_TIME_LIMIT_S = 900.0
CODERS = ("builtin", "llm")
# Sources whose change changes the generated candidates or how they are judged (paths under
# agents/): the compiler, the Verifier, the LLM agents with their prompt templates, and the
# bench code that builds and measures a problem.
# What makes and judges candidates, per package (kernelstitch.agents, kernelstitch.bench).
_COMPILER_PARTS = {
    "agents": ("plan", "planner", "coder", "verifier", "llm", "pipeline.py"),
    "bench": ("tasks.py", "runner.py", "phases.py"),
}


def default_build_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))


@dataclass(frozen=True)
class BenchSettings:
    coder: str = "builtin"
    jobs: int = 1  # GPUs measuring at once, one problem each
    build_jobs: int = field(default_factory=default_build_jobs)  # problems preparing at once
    time_limit_s: float = DEFAULT_TIME_LIMIT_S  # per problem, prepare + measure
    profile: bool = False
    seeds: int = 3
    # Seconds of timed runs per implementation: a whole benchmark set fits a lent GPU's time at
    # 1 s (medians of hundreds of runs for ms-scale problems; never fewer than 15-30 runs).
    timing_budget_s: float = 1.0
    rerun: bool = False
    # The measured search (variants timed against the original; the original kept when nothing
    # beats it).  Off: the default plan alone, as before the search existed.
    search: bool = True
    ray_address: str | None = None
    llm: dict[str, Any] = field(default_factory=dict)  # PipelineConfig.llm (--llm-model ...)
    budget: dict[str, Any] = field(default_factory=dict)  # PipelineConfig.budget (--coder llm)
    precision: str = "fp32"  # the precision opt-in (kernelstitch/core/precision.py)

    def __post_init__(self) -> None:
        if self.coder not in CODERS:
            raise BenchError(f"--coder must be one of {', '.join(CODERS)}, got {self.coder!r}")
        if self.jobs < 1 or self.build_jobs < 1:
            raise BenchError("--jobs and --build-jobs must be at least 1")
        if not self.time_limit_s > 0:  # also NaN
            raise BenchError("--time-limit must be a positive number of seconds")
        if not self.timing_budget_s > 0:
            raise BenchError("--timing-budget must be a positive number of seconds")
        try:
            object.__setattr__(self, "precision", precision_mode(self.precision).name)
        except PrecisionError as exc:
            raise BenchError(f"--precision: {exc}") from None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchSettings:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def key_config(self) -> dict[str, Any]:
        """What changes a problem's result (jobs, time limit and where it ran do not)."""
        return {"coder": self.coder, "seeds": self.seeds, "profile": self.profile,
                "timing_budget_s": self.timing_budget_s, "search": self.search,
                "llm": self.llm, "budget": self.budget,
                **({"precision": self.precision} if self.precision != "fp32" else {})}


def check_llm_settings(settings: BenchSettings, environ: dict[str, str] | None = None) -> None:
    """--coder llm: the model, URL and key variable are usable, checked before any problem
    runs (otherwise every problem's LLM path fails to start and keeps its built-in candidate).
    With --ray the key is read on the nodes, so it is not looked up here."""
    if settings.coder != "llm":
        return
    from kernelstitch.agents.llm.config import LlmConfig, resolve_api_key
    from kernelstitch.agents.llm.errors import LlmConfigError

    try:
        config = LlmConfig.from_settings(settings.llm, settings.budget)
        config.validate()
        if not settings.ray_address:
            resolve_api_key(config, environ)
    except LlmConfigError as exc:
        raise BenchError(f"--coder llm: {exc}") from None


def compiler_fingerprint(roots: dict[str, Path] | None = None) -> str:
    """Hash of the sources that make and judge candidates (`roots`: the folder of each package
    in _COMPILER_PARTS): results of older code re-run."""
    if roots is None:
        roots = {"agents": package_root("kernelstitch.agents"),
                 "bench": package_root("kernelstitch.bench")}
    return tree_fingerprint(_COMPILER_PARTS, roots, salt=f"harness {HARNESS_VERSION}")


def resume_key(spec: ProblemSpec, settings: BenchSettings, device_label: str,
               fingerprint: str) -> str:
    payload = {"problem": spec.sha256, "module": spec.module, "config": settings.key_config(),
               "device": device_label, "compiler": fingerprint}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def resolve_devices(jobs: int, gpu_count: int, visible: str | None) -> list[int | None]:
    """The GPU index to give each measuring worker (WorkerClient's cuda_device).

    Workers get CUDA_VISIBLE_DEVICES=<index>, which replaces the parent's value, so indices are
    translated through the parent's CUDA_VISIBLE_DEVICES: with "2,3", --jobs 2 uses GPUs 2 and 3.
    One job inherits the parent's default device (None).
    """
    if jobs > max(gpu_count, 1):
        raise BenchError(f"--jobs {jobs} needs {jobs} GPUs but {gpu_count} are visible")
    if jobs == 1:
        return [None]
    if visible is None or not visible.strip():
        return list(range(jobs))
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if not all(e.isdigit() for e in entries):
        raise BenchError(
            f"CUDA_VISIBLE_DEVICES={visible!r} names GPUs by UUID; --jobs > 1 needs numeric "
            "indices there (or unset it)")
    return [int(e) for e in entries[:jobs]]
