"""Hover text (markdown): what KernelStitch knows about a module, a line, or a generated file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelstitch.server.jobs import Job
from kernelstitch.server.results import (
    FindingView,
    KernelView,
    ModuleResults,
    verdict_reasons,
    verdict_speedup,
    verdict_status,
)

from kernelstitch.core.precision import float64_describes
from kernelstitch.core.problem import ModuleInfo

_MAX_PLAN_STEPS = 8
_MAX_KERNELS = 8


def module_hover(info: ModuleInfo, entry: ModuleResults | None, job: Job | None,
                 findings_current: bool) -> str:
    parts = [f"**KernelStitch** · `{info.name}`"]
    if not info.has_inputs:
        parts.append("No example inputs yet: use *Add example inputs* to scaffold them.")
    if job is not None:
        parts.append(f"Job `{job.id}` ({job.spec.kind}): {job.state}, {job.message}")
    if entry is None:
        if info.has_inputs and job is None:
            parts.append("Not generated yet: *Generate CUDA implementation* plans, codes and "
                         "verifies a fused `ModelNew`.")
        return "\n\n".join(parts)
    search = selection_line(entry.selection)
    if search:
        parts.append(search)
    verdict = verdict_line(entry.verdict)
    if verdict:
        parts.append(verdict)
    plan = plan_summary(entry.plan)
    if plan:
        parts.append(plan)
    if findings_current and (entry.kernels or entry.findings):
        if entry.kernels:
            parts.append(kernel_table(entry.kernels))
        if entry.findings:
            parts.append("**Findings**\n\n" + "\n".join(
                f"- line {f.line or info.line}: {f.message}" for f in entry.findings))
    elif entry.findings or entry.kernels:
        parts.append("_Profile results were dropped: the code changed since the last run._")
    links = []
    if entry.candidate_path:
        links.append(f"[generated implementation]({_file_uri(entry.candidate_path)})")
    if entry.report_path:
        links.append(f"[report]({_file_uri(entry.report_path)})")
    if links:
        parts.append(" · ".join(links))
    return "\n\n".join(parts)


def line_hover(line: int, entry: ModuleResults) -> str | None:
    """Findings and kernels tied to 1-based `line`; None when the line has none."""
    findings = [f for f in entry.findings if f.line == line or line in f.related_lines]
    kernels = [k for k in entry.kernels if k.line == line]
    if not findings and not kernels:
        return None
    parts = [f"**KernelStitch** · `{entry.module}` line {line}"]
    if kernels:
        parts.append(kernel_table(kernels))
    parts += [finding_markdown(f) for f in findings]
    return "\n\n".join(parts)


def candidate_hover(entry: ModuleResults) -> str:
    parts = [f"**KernelStitch** · generated for `{entry.module}`"]
    parts.append(verdict_line(entry.verdict) or "Not verified yet.")
    reasons = verdict_reasons(entry.verdict)
    if reasons:
        parts.append("\n".join(
            f"- `{r.get('code', '?')}`: {r.get('message', '')}" for r in reasons[:6]))
    plan = plan_summary(entry.plan)
    if plan:
        parts.append(plan)
    return "\n\n".join(parts)


_MAX_WHY = 400  # a hover is not a report: the report has the whole table


def selection_line(selection: dict[str, Any] | None) -> str | None:
    """What the measured search chose, with each program's median in the shared timing run."""
    if not isinstance(selection, dict) or selection.get("decision") not in (
            "deliver", "keep_original"):
        return None
    times = [("original", (selection.get("original_ms") or {}).get("median"))]
    rows = [selection.get("original_graph"), *(selection.get("variants") or [])]
    times += [(str(v.get("name")), (v.get("time_ms") or {}).get("median"))
              for v in rows if isinstance(v, dict)]
    table = ", ".join(f"{name} {ms:.3f} ms" for name, ms in times
                      if isinstance(ms, (int, float)) and not isinstance(ms, bool))
    if selection["decision"] == "keep_original":
        head = "**Kept your module**: no variant was verified faster."
    else:
        head = f"**Delivered `{selection.get('winner')}`**, the fastest verified variant."
    why = selection.get("why")
    why = f" Why: {why[:_MAX_WHY]}" if isinstance(why, str) and why else ""
    return head + (f" Measured: {table}." if table else "") + why


def verdict_line(verdict: dict[str, Any] | None) -> str | None:
    status = verdict_status(verdict)
    if status is None:
        return None
    speedup = verdict_speedup(verdict)
    text = {"accepted": "✅ accepted", "rejected": "❌ rejected",
            "could_not_verify": "⚠️ could not verify"}.get(status, status)
    line = f"**Verdict:** {text}"
    timings = verdict.get("timings") if isinstance(verdict, dict) else None
    precision = timings.get("precision") if isinstance(timings, dict) else None
    if speedup is not None and isinstance(precision, str) and _reduced(precision):
        # the precision opt-in: both speed-ups, and what it cost in accuracy
        fp32 = timings.get("speedup_vs_eager_fp32")
        if isinstance(fp32, (int, float)) and not isinstance(fp32, bool):
            line += f" · **{fp32:.2f}x** vs fp32 eager"
        line += f" · **{speedup:.2f}x** vs eager with {precision}"
        report = verdict.get("precision")
        error = report.get("max_rel_error") if isinstance(report, dict) else None
        fp32_error = report.get("fp32_max_rel_error") if isinstance(report, dict) else None
        bound = report.get("atol") if isinstance(report, dict) else None
        if isinstance(error, (int, float)) and not isinstance(error, bool):
            if isinstance(fp32_error, (int, float)) and isinstance(bound, (int, float)) \
                    and not float64_describes(float(fp32_error), float(bound)):
                line += " · float64 error not meaningful (random draws: judged against PyTorch)"
            else:
                line += f" · max error {error:.1e} × RMS vs float64"
    elif speedup is not None:
        line += f" · **{speedup:.2f}x** vs eager PyTorch"
    if status == "could_not_verify":
        reasons = verdict_reasons(verdict)
        if reasons:
            line += f" ({reasons[0].get('message', '')})"
    return line


def plan_summary(plan: dict[str, Any] | None) -> str | None:
    if not isinstance(plan, dict):
        return None
    steps = plan.get("steps")
    lines = []
    if isinstance(steps, list):
        for index, step in enumerate(steps[:_MAX_PLAN_STEPS], start=1):
            if isinstance(step, dict):
                text = step.get("description") or step.get("name") or step.get("kind")
            else:
                text = step
            lines.append(f"{index}. {text}")
        if len(steps) > _MAX_PLAN_STEPS:
            lines.append(f"… and {len(steps) - _MAX_PLAN_STEPS} more")
    summary = plan.get("summary")
    head = f"**Plan** ({len(steps) if isinstance(steps, list) else 0} steps)"
    if isinstance(summary, str) and summary:
        head += f": {summary}"
    return "\n".join([head, ""] + lines) if lines or summary else None


def kernel_table(kernels: list[KernelView]) -> str:
    rows = ["| kernel | time | % of peak | bound |", "|---|---:|---:|---|"]
    for k in sorted(kernels, key=lambda k: -k.total_us)[:_MAX_KERNELS]:
        pct = f"{k.pct_of_peak:.0f}%" if k.pct_of_peak is not None else "–"
        calls = f" ×{k.calls}" if k.calls > 1 else ""
        rows.append(f"| `{_short(k.name)}`{calls} | {k.total_us:.1f} µs | {pct} | "
                    f"{k.bound or '–'} |")
    return "\n".join(rows)


def finding_markdown(finding: FindingView) -> str:
    parts = [f"**{finding.severity}**: {finding.message}"]
    if finding.kernel:
        parts.append(f"kernel `{_short(finding.kernel)}`")
    if finding.detail:
        parts.append(finding.detail)
    if finding.suggestion:
        parts.append(f"*Suggestion:* {finding.suggestion}")
    return "\n\n".join(parts)


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _file_uri(path: str) -> str:
    return Path(path).as_uri()


def _reduced(precision: str) -> bool:
    from kernelstitch.core.precision import PrecisionError, precision_mode

    try:
        return precision_mode(precision).reduced
    except PrecisionError:
        return False
