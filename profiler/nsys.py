"""Nsight Systems backend: `nsys profile` + `nsys stats` CSV reports.

On the GPU machines available to this project nsys writes a .qdstrm but cannot turn it into a
report, so `run_nsys` raises NsysError and the caller records one note and uses torch.profiler's
timeline instead.  The CSV parsers follow the documented `nsys stats --format csv` layout of the
cuda_gpu_kern_sum and cuda_api_sum reports.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


class NsysError(Exception):
    pass


@dataclass
class NsysSummaryRow:
    name: str
    time_pct: float
    total_ns: float
    instances: int
    avg_ns: float
    min_ns: float
    max_ns: float


# Where the CUDA images bundle an nsys without putting it on PATH.
BUNDLED_NSYS_GLOB = "nsight-compute/*/host/target-linux-x64/nsys"


def nsys_available() -> str | None:
    found = shutil.which("nsys")
    if found:
        return found
    bundled = sorted(Path("/opt/nvidia").glob(BUNDLED_NSYS_GLOB))
    return str(bundled[-1]) if bundled else None


def _number(text: str) -> float:
    return float(text.replace(",", "").strip() or 0)


def parse_stats_csv(text: str) -> list[NsysSummaryRow]:
    """Rows of a cuda_gpu_kern_sum or cuda_api_sum CSV (`Instances` or `Num Calls` column).
    Lines before the header (nsys prints the report name and notices) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Time (%)" in line and "Name" in line), None)
    if start is None:
        raise NsysError("no nsys stats CSV header ('Time (%)', ..., 'Name') found")
    rows = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not row.get("Name"):
            continue
        count = row.get("Instances") or row.get("Num Calls") or "0"
        rows.append(
            NsysSummaryRow(
                name=row["Name"],
                time_pct=_number(row.get("Time (%)", "0")),
                total_ns=_number(row.get("Total Time (ns)", "0")),
                instances=int(_number(count)),
                avg_ns=_number(row.get("Avg (ns)", "0")),
                min_ns=_number(row.get("Min (ns)", "0")),
                max_ns=_number(row.get("Max (ns)", "0")),
            )
        )
    return rows


@dataclass
class NsysRun:
    kernels: list[NsysSummaryRow]
    api: list[NsysSummaryRow]


def run_nsys(problem: Path, module: str | None, work_dir: Path, timeout_s: float = 300) -> NsysRun:
    nsys = nsys_available()
    if not nsys:
        raise NsysError("nsys is not on PATH (nor bundled under /opt/nvidia)")
    work_dir.mkdir(parents=True, exist_ok=True)
    report = work_dir / "nsys_report"
    target = [sys.executable, "-m", "kernelstitch.profiler.ncu_target", str(problem)]
    target += ["--module", module] if module else []
    cmd = [nsys, "profile", "--force-overwrite", "true", "--trace", "cuda,nvtx",
           "--capture-range", "cudaProfilerApi", "-o", str(report), *target]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
    rep = report.with_suffix(".nsys-rep")
    if not rep.exists():
        raise NsysError(
            f"nsys produced no report (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}"
        )
    results = {}
    for name in ("cuda_gpu_kern_sum", "cuda_api_sum"):
        stats = subprocess.run(
            [nsys, "stats", "--report", name, "--format", "csv", str(rep)],
            capture_output=True, text=True, check=False, timeout=timeout_s,
        )  # fmt: skip
        results[name] = parse_stats_csv(stats.stdout)
    return NsysRun(results["cuda_gpu_kern_sum"], results["cuda_api_sum"])
