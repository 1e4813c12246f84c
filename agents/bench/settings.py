"""The bench run's settings, the GPUs it uses, and the resume key of a problem."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.bench.problems import BenchError, ProblemSpec

HARNESS_VERSION = 1  # bump when the stored outcome's meaning changes: old results re-run
DEFAULT_TIME_LIMIT_S = 900.0
CODERS = ("builtin", "llm")
# Sources whose change changes the generated candidates or how they are judged.
_COMPILER_PARTS = ("graph", "planner", "coder", "codegen", "verifier", "llm", "pipeline.py")


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
    rerun: bool = False
    ray_address: str | None = None
    llm: dict[str, Any] = field(default_factory=dict)  # PipelineConfig.llm (--llm-model ...)
    budget: dict[str, Any] = field(default_factory=dict)  # PipelineConfig.budget (--coder llm)

    def __post_init__(self) -> None:
        if self.coder not in CODERS:
            raise BenchError(f"--coder must be one of {', '.join(CODERS)}, got {self.coder!r}")
        if self.jobs < 1 or self.build_jobs < 1:
            raise BenchError("--jobs and --build-jobs must be at least 1")
        if self.time_limit_s <= 0:
            raise BenchError("--time-limit must be a positive number of seconds")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchSettings:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def key_config(self) -> dict[str, Any]:
        """What changes a problem's result (jobs, time limit and where it ran do not)."""
        return {"coder": self.coder, "seeds": self.seeds, "profile": self.profile,
                "llm": self.llm, "budget": self.budget}


def compiler_fingerprint() -> str:
    """Hash of the planner/coder/codegen/verifier sources: results of older code re-run."""
    from kernelstitch import agents

    root = Path(agents.__file__).parent
    digest = hashlib.sha256(f"harness {HARNESS_VERSION}".encode())
    for part in _COMPILER_PARTS:
        target = root / part
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for path in files:
            if path.is_file():
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


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
