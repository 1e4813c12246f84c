"""Human output for a ProfileReport: a rich kernel table with findings, and a roofline PNG."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.profiler.findings import ProfileReport
from kernelstitch.profiler.rules import short_name

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan", "hint": "dim"}


def print_report(report: ProfileReport, console=None) -> None:
    from rich.table import Table

    from kernelstitch.core.terminal import console as make_console
    from kernelstitch.core.terminal import plain

    console = console or make_console()
    title = f"{plain(report.module)} on {plain(report.device)}"
    if report.forward_ms:
        title += f": {report.forward_ms:.3f} ms per forward"
    table = Table(title=title)
    for col, justify in (("line", "right"), ("kernel", "left"), ("op", "left"),
                         ("calls", "right"), ("time us", "right"), ("% floor", "right"),
                         ("DRAM %", "right"), ("occ %", "right")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for k in sorted(report.kernels, key=lambda k: -k.total_us):
        pct = k.pct_of_floor
        table.add_row(
            str(k.source_line or "-"),
            plain(short_name(k.name, 48)),
            plain((k.op or "-")[:24]),
            str(k.calls),
            f"{k.total_us:.1f}",
            f"{pct:.0f}" if pct is not None else "-",
            _metric(k.metrics, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            _metric(k.metrics, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        )
    console.print(table)
    for f in report.findings:
        where = f"line {f.source_line}" if f.source_line else "module"
        console.print(f"[{_STYLE[f.severity]}]{f.severity:7}[/] {where}: {plain(f.message)}")
        console.print(f"         {plain(f.explanation)}", style="dim", highlight=False)
        console.print(f"         fix: {plain(f.suggestion)}", style="dim", highlight=False)
    if report.notes:
        console.print("notes: " + plain("; ".join(report.notes)), style="dim")
    console.print(f"backends: {plain(', '.join(report.backends_used))}", style="dim")


def _metric(metrics: dict[str, float], key: str) -> str:
    return f"{metrics[key]:.0f}" if key in metrics else "-"


def plot_roofline(report: ProfileReport, path: Path) -> Path:
    """Each kernel at (FLOPs/byte, achieved FLOP/s) under the measured bandwidth and compute
    ceilings; the whole forward as a star."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if report.roofline is None:
        raise ValueError("report has no roofline data")
    peaks = report.roofline.peaks
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [10 ** (e / 10) for e in range(-30, 41)]
    bw = peaks.dram_bytes_per_s
    for dtype, style in (("fp32", ":"), ("bf16", "-")):
        peak = peaks.flops_per_s.get(dtype)
        if peak:
            ax.plot(xs, [min(bw * x, peak) for x in xs], style, color="gray",
                    label=f"roof {dtype} ({peak / 1e12:.0f} TFLOP/s, {bw / 1e12:.2f} TB/s)")  # fmt: skip
    for k in report.kernels:
        moved = k.dram_bytes or k.bytes
        if not moved or not k.flops or k.total_us <= 0:
            continue
        ax.scatter(
            k.flops / moved, k.flops / (k.total_us * 1e-6), s=min(20 + k.total_us, 200), alpha=0.7
        )
        ax.annotate(f"L{k.source_line or '?'} {short_name(k.name, 20)}",
                    (k.flops / moved, k.flops / (k.total_us * 1e-6)), fontsize=6)  # fmt: skip
    roof = report.roofline
    if roof.module_bytes and roof.module_flops and roof.actual_ms:
        ax.scatter(roof.module_flops / roof.module_bytes, roof.module_flops / (roof.actual_ms * 1e-3),
                   marker="*", s=200, color="black", label=f"forward ({roof.pct_of_floor:.0f}% of floor)")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"{report.module} on {report.device}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
