"""What the server knows about each module's runs: plan, verdict, findings, generated files.

Filled from job results as they arrive and, after a restart, from the workspace's run store.
Everything that came from a job is a JSON dict written by code that evolves separately, so it is
read defensively: a missing or oddly typed field degrades a hover, never a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelstitch.agents.job_protocol import JobResult


@dataclass(frozen=True)
class FindingView:
    severity: str  # error | warning | info | hint
    message: str
    line: int | None  # 1-based
    detail: str = ""
    suggestion: str = ""
    kernel: str | None = None
    related_lines: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, data: Any) -> FindingView | None:
        """Accepts the job's {line, detail} and the profiler's {source_line, explanation}."""
        if not isinstance(data, dict) or not data.get("message"):
            return None
        line = data.get("line", data.get("source_line"))
        related = data.get("related_lines") or ()
        return cls(
            severity=str(data.get("severity") or "info").lower(),
            message=str(data["message"]),
            line=line if isinstance(line, int) and line > 0 else None,
            detail=str(data.get("detail") or data.get("explanation") or ""),
            suggestion=str(data.get("suggestion") or ""),
            kernel=data.get("kernel") if isinstance(data.get("kernel"), str) else None,
            related_lines=tuple(x for x in related if isinstance(x, int)),
        )


@dataclass(frozen=True)
class KernelView:
    name: str
    total_us: float
    calls: int
    line: int | None
    pct_of_peak: float | None
    bound: str | None

    @classmethod
    def from_dict(cls, data: Any) -> KernelView | None:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        total = _number(data.get("total_us")) or 0.0
        floor = _number(data.get("floor_us"))
        pct = _number(data.get("pct_of_peak"))
        if pct is None and floor and total > 0:
            pct = 100.0 * floor / total
        line = data.get("source_line", data.get("line"))
        return cls(
            name=data["name"],
            total_us=total,
            calls=int(_number(data.get("calls")) or 1),
            line=line if isinstance(line, int) else None,
            pct_of_peak=pct,
            bound=data.get("bound") or data.get("category"),
        )


@dataclass
class ModuleResults:
    source_path: str
    module: str
    fingerprint: str | None = None  # module text the findings were measured on
    plan: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    findings: list[FindingView] = field(default_factory=list)
    kernels: list[KernelView] = field(default_factory=list)
    candidate_path: str | None = None
    report_path: str | None = None
    message: str = ""
    run_id: int | None = None
    selection: dict[str, Any] | None = None  # generate's measured search (JobResult.selection)
    from_store: bool = False  # read back after a restart rather than produced this session

    def speedup(self) -> float | None:
        return verdict_speedup(self.verdict)


def verdict_speedup(verdict: dict[str, Any] | None) -> float | None:
    if not isinstance(verdict, dict):
        return None
    timings = verdict.get("timings")
    if isinstance(timings, dict):
        return _number(timings.get("speedup_vs_eager"))
    return None


def verdict_status(verdict: dict[str, Any] | None) -> str | None:
    if isinstance(verdict, dict) and isinstance(verdict.get("status"), str):
        return verdict["status"]
    return None


def verdict_reasons(verdict: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(verdict, dict) or not isinstance(verdict.get("reasons"), list):
        return []
    return [r for r in verdict["reasons"] if isinstance(r, dict)]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


class ResultStore:
    def __init__(self) -> None:
        self._by_module: dict[tuple[str, str], ModuleResults] = {}
        self._by_candidate: dict[str, tuple[str, str]] = {}

    def get(self, source_path: str, module: str) -> ModuleResults | None:
        return self._by_module.get((_key(source_path), module))

    def for_source(self, source_path: str) -> list[ModuleResults]:
        key = _key(source_path)
        return [r for (src, _), r in self._by_module.items() if src == key]

    def for_candidate(self, candidate_path: str) -> ModuleResults | None:
        owner = self._by_candidate.get(_key(candidate_path))
        return self._by_module.get(owner) if owner else None

    def entry(self, source_path: str, module: str) -> ModuleResults:
        key = (_key(source_path), module)
        if key not in self._by_module:
            self._by_module[key] = ModuleResults(key[0], module)
        return self._by_module[key]

    def record(self, result: JobResult, fingerprint: str | None) -> ModuleResults | None:
        """Merge a job result: generate/verify bring a verdict, profile brings findings."""
        if not result.module or not result.source_path:
            return None
        entry = self.entry(result.source_path, result.module)
        entry.from_store = False
        entry.message = result.message
        entry.run_id = result.run_id if result.run_id is not None else entry.run_id
        if isinstance(result.plan, dict):
            entry.plan = result.plan
        if result.verdict is not None or result.kind in ("generate", "verify"):
            entry.verdict = result.verdict if isinstance(result.verdict, dict) else None
        if isinstance(result.selection, dict):
            entry.selection = result.selection
            if result.selection.get("decision") == "keep_original":
                self.drop_candidate(entry)  # nothing is offered as a replacement
        if result.candidate_path:
            self.set_candidate(entry, result.candidate_path)
        if result.report_path:
            entry.report_path = result.report_path
        findings = [f for f in map(FindingView.from_dict, result.findings or []) if f]
        if result.kind == "profile" or findings:
            entry.findings = findings
            entry.fingerprint = fingerprint
        if result.kind == "profile":
            entry.kernels = []  # the kernel table is in the run store: see set_profile
        return entry

    def set_profile(self, entry: ModuleResults, profile: dict[str, Any] | None) -> None:
        """Kernels (and findings, if the result had none) from a stored ProfileReport."""
        if not isinstance(profile, dict):
            return
        entry.kernels = kernels_from_profile(profile)
        if not entry.findings and isinstance(profile.get("findings"), list):
            entry.findings = [f for f in map(FindingView.from_dict, profile["findings"]) if f]

    def set_candidate(self, entry: ModuleResults, candidate_path: str) -> None:
        entry.candidate_path = _key(candidate_path)
        self._by_candidate[entry.candidate_path] = (entry.source_path, entry.module)

    def drop_candidate(self, entry: ModuleResults) -> None:
        if entry.candidate_path:
            self._by_candidate.pop(entry.candidate_path, None)
        entry.candidate_path = None

    def drop_findings(self, source_path: str, module: str) -> bool:
        """The module's text changed: its line-tied results are stale.  True if any dropped."""
        entry = self.get(source_path, module)
        if entry is None or not (entry.findings or entry.kernels):
            return False
        entry.findings, entry.kernels, entry.fingerprint = [], [], None
        return True


def kernels_from_profile(data: Any) -> list[KernelView]:
    """KernelViews of a ProfileReport dict (kernel_stat entries: name, total_us, floor_us...)."""
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), list):
        return []
    return [k for k in map(KernelView.from_dict, data["kernels"]) if k]
