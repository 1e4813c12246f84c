"""The markdown report written next to a generated candidate (and shown in the editor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# A report is read by people (and shown in the editor): past this size it is cut, saying so.
MAX_REPORT_CHARS = 200_000


def recommendation(verdict: Any) -> str:
    """What the user should do with the candidate, stated plainly."""
    if verdict is None:
        return "Not verified: run `kernelstitch verify` on a machine with a CUDA GPU before use."
    if verdict.status == "rejected":
        return "Rejected by the Verifier: keep your original module."
    if verdict.status == "could_not_verify":
        return "Could not verify here (see below): do not rely on it until it is verified."
    timings = verdict.timings
    if timings is None:
        return "Accepted (correctness only; timing was not run)."
    if timings.speedup_vs_eager < 1.0 and timings.significant_vs_eager:
        return (
            f"Correct but slower than eager PyTorch ({timings.speedup_vs_eager:.2f}x): "
            "keep your original module."
        )
    if not timings.significant_vs_eager:
        return "Correct; the speed difference to eager PyTorch is within noise."
    return f"Accepted: {timings.speedup_vs_eager:.2f}x faster than eager PyTorch."


def render_report(plan: Any, verdict: Any, source: Path, module: str, candidate: Path,
                  extra_sections: list[str] | None = None) -> str:
    """`extra_sections`: markdown appended after the verification (e.g. the LLM agents')."""
    from kernelstitch.agents.plan import render_plan_markdown

    parts = [
        f"# KernelStitch report: `{module}`",
        "",
        f"- source: `{source}`",
        f"- candidate: `{candidate}`",
        f"- recommendation: **{recommendation(verdict)}**",
        "",
        "## Plan",
        "",
        render_plan_markdown(plan),
        "",
        "## Verification",
        "",
    ]
    if verdict is None:
        parts.append("Verification was not run.")
    else:
        from kernelstitch.agents.verifier.verdict import render_verdict_markdown

        parts.append(render_verdict_markdown(verdict))
    for section in extra_sections or []:
        parts += ["", section.rstrip()]
    from kernelstitch.agents.llm.config import redact
    from kernelstitch.agents.llm.limits import clip

    # The plan and the LLM section may quote a model's replies: no key-shaped text, bounded.
    return clip(redact("\n".join(parts)), MAX_REPORT_CHARS) + "\n"
