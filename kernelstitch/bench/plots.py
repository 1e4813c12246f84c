"""PNG plots of a bench run (matplotlib is an optional extra: `pip install kernelstitch[plots]`).

speedup_hist.png: distribution of correct candidates' speedups (log scale, 1x marked).
speedup_per_problem.png: speedup of every problem vs eager and vs torch.compile; problems
    without a correct, timed candidate are labelled with their status.
Figures are built with matplotlib.figure.Figure (no pyplot): no global state, no display.
"""

from __future__ import annotations

import math
from pathlib import Path

from kernelstitch.bench.outcome import ProblemOutcome

HIST_NAME = "speedup_hist.png"
BARS_NAME = "speedup_per_problem.png"
MISSING_NOTE = "plots skipped: matplotlib is not installed (pip install 'kernelstitch[plots]')"


def _log_bins(values: list[float], count: int = 20) -> list[float]:
    low = min(min(values), 0.5)
    high = max(max(values), 2.0)
    lo, hi = math.log10(low), math.log10(high)
    return [10 ** (lo + (hi - lo) * i / count) for i in range(count + 1)]


def _histogram(outcomes: list[ProblemOutcome], path: Path, figure_cls) -> None:
    fig = figure_cls(figsize=(7, 4.5), dpi=110)
    ax = fig.add_subplot()
    series = [
        ("vs eager", [o.speedup_vs_eager for o in outcomes if o.correct and o.speedup_vs_eager]),
        ("vs torch.compile",
         [o.speedup_vs_compiled for o in outcomes if o.correct and o.speedup_vs_compiled]),
    ]
    values = [v for _, vs in series for v in vs]
    if values:
        bins = _log_bins(values)
        for label, vs in series:
            if vs:
                ax.hist(vs, bins=bins, alpha=0.6, label=f"{label} (n={len(vs)})")
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no correct candidate with timings", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("speedup (baseline time / our time)")
    ax.set_ylabel("problems")
    ax.set_title(f"Speedup distribution ({len(outcomes)} problems)")
    fig.tight_layout()
    fig.savefig(path)


def _bars(outcomes: list[ProblemOutcome], path: Path, figure_cls) -> None:
    n = max(len(outcomes), 1)
    fig = figure_cls(figsize=(min(max(6.0, 0.35 * n + 2), 60), 5), dpi=110)
    ax = fig.add_subplot()
    xs = list(range(len(outcomes)))
    width = 0.4
    eager = [o.speedup_vs_eager if o.correct and o.speedup_vs_eager else 0.0 for o in outcomes]
    comp = [o.speedup_vs_compiled if o.correct and o.speedup_vs_compiled else 0.0
            for o in outcomes]
    ax.bar([x - width / 2 for x in xs], eager, width, label="vs eager")
    ax.bar([x + width / 2 for x in xs], comp, width, label="vs torch.compile")
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    labels = [o.problem if o.correct else f"{o.problem} [{o.status}]" for o in outcomes]
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("speedup")
    ax.set_title("Speedup per problem (1.0 = baseline)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def write_plots(outcomes: list[ProblemOutcome], out_dir: Path) -> tuple[list[Path], str | None]:
    """The PNG paths written, and a one-line note when plots could not be made."""
    try:
        from matplotlib.figure import Figure  # savefig picks the Agg canvas for .png
    except ImportError:
        return [], MISSING_NOTE
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / HIST_NAME, out_dir / BARS_NAME]
    _histogram(outcomes, paths[0], Figure)
    _bars(outcomes, paths[1], Figure)
    return paths, None
