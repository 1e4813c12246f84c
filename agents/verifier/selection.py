"""Measure, then choose: which of the measured programs is delivered (torch-free).

The variants and the original module are timed in one worker on the same inputs
(`variant_timing.py`); a variant is a contender only when it is significantly faster than the
original there (p10-p90 ranges apart, as everywhere in the Verifier).  Contenders are verified
fully, fastest first; the first accepted one whose own verdict is still significantly faster
than eager is delivered.  Otherwise the decision is to keep the original: a user never gets a
program slower than the one they wrote.

The original is also timed replayed from a CUDA graph (`graph_replay.py`).  That row is a
baseline, not a contender (it runs none of our kernels): it says how much of a winner's gain a
CUDA graph alone would give, and when it is the fastest program the report says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kernelstitch.agents.verifier.stats import significant, summarize
from kernelstitch.agents.verifier.verdict import Stat, Verdict

from kernelstitch.core.precision import precision_mode

Decision = Literal["deliver", "keep_original"]
ORIGINAL = "original"
ORIGINAL_GRAPH = "original-graph"
# Under a reduced precision (the user's opt-in) the original is timed with the precision allowed
# (the floor: what flipping torch's flags in the user's own code gives) and, as this row, as the
# user runs it today: fp32 under PyTorch's default settings.
ORIGINAL_FP32 = "original-fp32"
ORIGINAL_GRAPH_REASON = "your module, replayed from a CUDA graph (a baseline, not delivered)"


@dataclass
class MeasuredVariant:
    name: str
    reason: str
    time_ms: Stat | None = None  # None: it did not build or run (see `error`)
    error: str | None = None
    verdict: str | None = None  # the full verification's status, for those verified
    note: str = ""  # why it was not delivered, when it was a contender

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeasuredVariant:
        time = data.get("time_ms")
        return cls(name=data["name"], reason=data.get("reason", ""),
                   time_ms=Stat(**time) if time else None, error=data.get("error"),
                   verdict=data.get("verdict"), note=data.get("note", ""))


@dataclass
class Selection:
    decision: Decision
    winner: str | None
    original_ms: Stat | None
    variants: list[MeasuredVariant] = field(default_factory=list)
    why: str = ""
    reused: bool = False  # the decision came from the run store's cache
    original_graph: MeasuredVariant | None = None  # the original under CUDA-graph replay
    # a reduced precision: the original in fp32 (PyTorch's defaults) (original_ms had the precision allowed)
    original_fp32_ms: Stat | None = None

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "winner": self.winner,
                "original_ms": asdict(self.original_ms) if self.original_ms else None,
                "variants": [v.to_json() for v in self.variants], "why": self.why,
                "reused": self.reused,
                "original_graph": self.original_graph.to_json() if self.original_graph else None,
                **({"original_fp32_ms": asdict(self.original_fp32_ms)} if self.original_fp32_ms
                   else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Selection:
        original = data.get("original_ms")
        return cls(decision=data["decision"], winner=data.get("winner"),
                   original_ms=Stat(**original) if original else None,
                   variants=[MeasuredVariant.from_json(v) for v in data.get("variants", [])],
                   why=data.get("why", ""), reused=bool(data.get("reused", False)),
                   original_graph=MeasuredVariant.from_json(data["original_graph"])
                   if data.get("original_graph") else None,
                   original_fp32_ms=Stat(**data["original_fp32_ms"])
                   if data.get("original_fp32_ms") else None)


def graph_baseline(timed: dict[str, Any] | None) -> MeasuredVariant | None:
    """The worker's `original_graph` entry as a table row (None when it was not timed)."""
    if not timed:
        return None
    samples = timed.get("samples_ms")
    return MeasuredVariant(ORIGINAL_GRAPH, ORIGINAL_GRAPH_REASON,
                           time_ms=summarize(samples) if samples else None,
                           error=None if samples else str(timed.get("error") or "not timed"))


def graph_note(original: Stat | None, graphed: MeasuredVariant | None,
               winner: MeasuredVariant | None = None) -> str:
    """What CUDA-graph replay of the original alone measured, next to the winner (if any)."""
    if original is None or graphed is None or graphed.time_ms is None:
        return ""
    gain = original.median / graphed.time_ms.median
    alone = (f"the original replayed from a CUDA graph took {graphed.time_ms.median:.3f} ms "
             f"({gain:.2f}x)")
    if winner is not None and winner.time_ms is not None:
        if graphed.time_ms.median <= winner.time_ms.median:
            return (f"{alone}, as fast as {winner.name}: most of the gain is launch overhead")
        return f"{alone}: {winner.name} gains more than launch overhead"
    if gain > 1.0 and significant(graphed.time_ms, original):
        return (f"{alone}: replaying your module from a CUDA graph (torch.cuda.graphs) is a host "
                "setting you can apply yourself")
    return f"{alone}: launch overhead is not what limits it"


def contenders(original: Stat, measured: list[MeasuredVariant],
               original_fp32: Stat | None = None) -> list[MeasuredVariant]:
    """The variants significantly faster than the original in the shared run, fastest first.
    Under a reduced precision (`original_fp32`: the original in fp32 (PyTorch's defaults), `original` with the
    precision allowed): significantly faster than the fp32 original the user runs today
    and not significantly slower than the original with the precision allowed (the rule
    `delivers` confirms).  A program level with autocast beats keeping the fp32 original:
    an H100 bf16 run kept 9_Matmul_Subtract_Multiply_ReLU at 2.86 ms while autocast eager took
    0.40 ms and our bf16 programs as much, so the user got the slowest of the three."""
    if original_fp32 is not None:
        faster = [v for v in measured if v.time_ms is not None
                  and (v.time_ms.median < original.median or not significant(v.time_ms, original))
                  and v.time_ms.median < original_fp32.median
                  and significant(v.time_ms, original_fp32)]
    else:
        faster = [v for v in measured if v.time_ms is not None
                  and v.time_ms.median < original.median and significant(v.time_ms, original)]
    for v in measured:
        if v not in faster and v.time_ms is not None:
            v.note = v.note or ("not faster than the original" if v.time_ms.median >= original.median
                                else "within noise of the original")
    return sorted(faster, key=lambda v: v.time_ms.median)


def delivers(verdict: Verdict) -> tuple[bool, str]:
    """Whether a fully verified contender may replace the original, and why not."""
    if verdict.status != "accepted":
        codes = ", ".join(r.code for r in verdict.reasons) or verdict.status
        # the first two reasons: a summary reason (behaviour_changes_when_timed) comes before
        # the failure that has the numbers
        first = "".join(f"{'; ' if k else ': '}{r.message[:200]}"
                        for k, r in enumerate(verdict.reasons[:2]))
        return False, f"verification: {verdict.status} ({codes}{first})"
    t = verdict.timings
    if t is None:
        return False, "verification measured no timings"
    if t.eager_fp32_ms is not None and t.speedup_vs_eager_fp32 is not None:
        # a reduced precision: a real gain over the module as it runs today (fp32, PyTorch's defaults), and
        # never significantly slower than eager with the precision allowed
        if t.speedup_vs_eager_fp32 <= 1.0 or not significant(t.eager_fp32_ms, t.candidate_ms):
            return False, (f"verification timed it at {t.speedup_vs_eager_fp32:.2f}x vs fp32 "
                           "eager" + ("" if t.speedup_vs_eager_fp32 <= 1.0 else ", within noise"))
        if t.speedup_vs_eager < 1.0 and t.significant_vs_eager:
            return False, (f"verification timed it at {t.speedup_vs_eager:.2f}x vs eager with "
                           f"{t.precision} allowed")
        return True, ""
    if t.speedup_vs_eager <= 1.0 or not t.significant_vs_eager:
        return False, (f"verification timed it at {t.speedup_vs_eager:.2f}x vs eager"
                       + ("" if t.significant_vs_eager else ", within noise"))
    return True, ""


def keep_original(original: Stat | None, measured: list[MeasuredVariant], why: str,
                  graphed: MeasuredVariant | None = None) -> Selection:
    note = graph_note(original, graphed)
    return Selection("keep_original", None, original, measured,
                     f"{why}; {note}" if note else why, original_graph=graphed)


def deliver(original: Stat | None, measured: list[MeasuredVariant], winner: MeasuredVariant,
            verdict: Verdict, graphed: MeasuredVariant | None = None) -> Selection:
    t = verdict.timings
    why = (f"{winner.name} ({winner.reason}) was the fastest verified variant: "
           f"{t.speedup_vs_eager:.2f}x vs eager in verification" if t else winner.name)
    note = graph_note(original, graphed, winner)
    return Selection("deliver", winner.name, original, measured,
                     f"{why}; {note}" if note else why, original_graph=graphed)


def precision_floor_note(original: Stat | None, original_fp32: Stat | None,
                         precision: str) -> str:
    """Under a reduced precision: what allowing it in the user's own code measured."""
    if original is None or original_fp32 is None:
        return ""
    return (f"your module with {precision} allowed ({precision_mode(precision).baseline}) "
            f"took {original.median:.3f} ms against {original_fp32.median:.3f} ms in fp32 "
            f"({original_fp32.median / original.median:.2f}x)")


def nothing_faster_reason(original: Stat, measured: list[MeasuredVariant]) -> str:
    timed = [v for v in measured if v.time_ms is not None]
    if not timed:
        return "no variant built and ran; the original is kept"
    best = min(timed, key=lambda v: v.time_ms.median)
    return (f"no variant was significantly faster than the original ({original.median:.3f} ms): "
            f"the best, {best.name}, took {best.time_ms.median:.3f} ms; the original is kept")


def markdown_table(selection: Selection) -> str:
    rows = ["| program | what | median ms | p10-p90 ms | result |", "|---|---|---|---|---|"]
    o = selection.original_ms
    f = selection.original_fp32_ms
    if f is not None:
        rows.append(f"| {ORIGINAL_FP32} | your module, eager in fp32 | {f.median:.4f} | "
                    f"{f.p10:.4f}-{f.p90:.4f} | as you run it today |")
    if o is not None:
        kept = " **kept**" if selection.decision == "keep_original" else ""
        rows.append(f"| {ORIGINAL} | your module, eager | {o.median:.4f} | {o.p10:.4f}-{o.p90:.4f} "
                    f"| baseline{kept} |")
    graphed = [selection.original_graph] if selection.original_graph else []
    for v in [*graphed, *selection.variants]:
        if v.time_ms is None:
            rows.append(f"| {v.name} | {v.reason} | - | - | {v.error or 'not run'} |")
            continue
        result = "**delivered**" if v.name == selection.winner else (
            "baseline" if v.name == ORIGINAL_GRAPH else (v.note or v.verdict or ""))
        rows.append(f"| {v.name} | {v.reason} | {v.time_ms.median:.4f} | "
                    f"{v.time_ms.p10:.4f}-{v.time_ms.p90:.4f} | {result} |")
    return "\n".join(rows)
