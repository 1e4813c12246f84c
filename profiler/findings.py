"""Typed profile results shared with the language server, the agents and the report.

Torch-free and dependency-free on purpose: the language server imports this module to turn a
saved profile JSON into diagnostics and hovers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SEVERITIES = ("error", "warning", "info", "hint")  # LSP DiagnosticSeverity order


@dataclass
class Finding:
    rule: str  # stable id, e.g. "fusable-elementwise-chain"
    severity: str  # one of SEVERITIES
    message: str  # one line, shown as the diagnostic
    explanation: str  # the numbers behind it, shown on hover
    suggestion: str  # what to change
    source_line: int | None = None  # 1-based line in the problem file
    kernel: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    related_lines: list[int] = field(default_factory=list)  # other lines the finding involves

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")


@dataclass
class KernelStat:
    """One GPU kernel (all its launches in one forward), tied to the line that launched it."""

    name: str
    calls: int  # launches per forward
    total_us: float  # GPU time per forward
    op: str | None = None  # the torch call that launched it ("aten::addmm", "linear")
    op_index: int | None = None  # position of that call in the forward's op log
    source_line: int | None = None  # innermost line in the problem file
    module: str | None = None  # qualified submodule name ("" = the profiled module itself)
    category: str = "other"  # gemm | elementwise | reduction | copy | other
    dtype: str | None = None
    bytes: float | None = None  # estimated compulsory bytes from shapes
    flops: float | None = None  # estimated FLOPs from shapes
    dram_bytes: float | None = None  # measured by ncu when available
    floor_us: float | None = None  # roofline lower bound on the time
    metrics: dict[str, float] = field(default_factory=dict)  # raw ncu metrics

    @property
    def avg_us(self) -> float:
        return self.total_us / max(self.calls, 1)

    @property
    def pct_of_floor(self) -> float | None:
        """How close to the achievable floor: 100% means at the roofline."""
        if not self.floor_us or self.total_us <= 0:
            return None
        return 100.0 * self.floor_us / self.total_us


@dataclass
class DevicePeaks:
    """Measured (not datasheet) peaks for one device: the roofline's ceilings."""

    name: str
    dram_bytes_per_s: float
    flops_per_s: dict[str, float]  # by dtype: "fp32", "fp16", "bf16"
    sm_count: int = 0
    measured: bool = True  # False: a fallback estimate

    def peak_flops(self, dtype: str | None) -> float:
        return self.flops_per_s.get(dtype or "fp32") or self.flops_per_s.get("fp32", 1.0)


@dataclass
class Roofline:
    peaks: DevicePeaks
    module_bytes: float  # inputs + parameters + outputs: the traffic no implementation avoids
    module_flops: float
    kernel_bytes: float  # what the kernels move, summed (estimated, or measured by ncu)
    floor_ms: float  # max(module_bytes / bandwidth, module_flops / peak)
    actual_ms: float
    bound: str  # "memory" or "compute"

    @property
    def pct_of_floor(self) -> float:
        return 100.0 * self.floor_ms / self.actual_ms if self.actual_ms > 0 else 0.0


@dataclass
class ProfileReport:
    device: str
    module: str
    kernels: list[KernelStat] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    roofline: Roofline | None = None
    backends_used: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem_path: str | None = None
    forward_ms: float | None = None  # GPU time per forward (CUDA events, no profiler)
    forward_wall_ms: float | None = None  # host time per forward

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema"] = 1
        return data

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileReport:
        roof = data.get("roofline")
        roofline = None
        if roof:
            roofline = Roofline(**{**roof, "peaks": DevicePeaks(**roof["peaks"])})
        known = {f.name for f in fields(cls)}
        rest = {k: v for k, v in data.items() if k in known}
        return cls(
            **{
                **rest,
                "kernels": [KernelStat(**k) for k in data.get("kernels", [])],
                "findings": [Finding(**f) for f in data.get("findings", [])],
                "roofline": roofline,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ProfileReport:
        return cls.from_dict(json.loads(text))

    def findings_for_line(self, line: int) -> list[Finding]:
        return [f for f in self.findings if f.source_line == line or line in f.related_lines]

    def kernels_for_line(self, line: int) -> list[KernelStat]:
        return [k for k in self.kernels if k.source_line == line]
