"""The accuracy price of a reduced precision, from the judge's own record (torch-free).

Each comparison the judge made under a reduced precision lists, per floating output, the
candidate's and PyTorch fp32's largest error from the float64 recomputation (compare.py's
`precision_errors`).  The report keeps the worst over every case and output; it comes from the
reference worker's ledger, never from the candidate's process.
"""

from __future__ import annotations

from typing import Any

from kernelstitch.agents.verifier.tolerances import PRECISION_TOLERANCES
from kernelstitch.agents.verifier.verdict import PrecisionReport


def precision_report(ledger: list[dict[str, Any]] | None) -> PrecisionReport | None:
    """None when no comparison ran under a reduced precision."""
    entries = [e for e in ledger or [] if e.get("precision") not in (None, "fp32")]
    if not entries:
        return None
    precision = str(entries[0]["precision"])
    bound = PRECISION_TOLERANCES.get(precision, PRECISION_TOLERANCES["fp32"])
    errors = [err for e in entries for err in e.get("precision_errors") or []]
    compared = [e for e in entries if e.get("float64_reference")]

    def worst(key: str) -> float | None:
        values = [float(err[key]) for err in errors if err.get(key) is not None]
        if any(v != v for v in values):  # NaN: a non-finite output where float64 is finite
            return float("nan")
        return max(values) if values else None

    return PrecisionReport(
        precision=precision, rtol=bound.rtol, atol=bound.atol, cases=len(compared),
        max_abs_error=worst("max_abs_error"), max_rel_error=worst("max_rel_error"),
        fp32_max_rel_error=worst("fp32_max_rel_error"),
        float64_missing=len(entries) - len(compared))
