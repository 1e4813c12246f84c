"""Capture the profiler's test fixtures on a CUDA machine with ncu (run by capture_fixtures.sh).

Writes into OUT_DIR: ncu_query_metrics_subset.txt, ncu_raw.csv (+ ncu_dropped.txt),
ncu_sections_header.txt, torch_trace.json.gz, torch_profile_meta.json, device_peaks.json,
nsys_check.txt.  Every step is independent: one failing still leaves the others.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

from kernelstitch.profiler import ncu as ncu_backend
from kernelstitch.profiler import tasks

PROBLEM = Path("tests/fixtures/profiler/problem_small.py")


def step(name, fn, summary):
    try:
        summary[name] = fn()
    except Exception as exc:  # noqa: BLE001  keep going: a fixture is better than none
        traceback.print_exc()
        summary[name] = f"FAILED: {type(exc).__name__}: {exc}"


def query_metrics(out: Path) -> str:
    text = subprocess.run(
        ["ncu", "--query-metrics"], capture_output=True, text=True, check=False
    ).stdout
    bases = {m.split(".")[0] for m in ncu_backend.DEFAULT_METRICS}
    keep = [
        line for line in text.splitlines()
        if line.split(" ")[0] in bases or "stalled" in line or "tensor" in line
    ]  # fmt: skip
    (out / "ncu_query_metrics_subset.txt").write_text("\n".join(keep) + "\n")
    present = {line.split(" ")[0] for line in keep}
    missing = sorted(b for b in bases if b not in present)
    return f"{len(keep)} lines kept; bases not listed: {missing}"


def ncu_profile(out: Path) -> str:
    run = ncu_backend.run_ncu(PROBLEM, None, out / "ncu_work")
    shutil.copy(out / "ncu_work" / "ncu_raw.csv", out / "ncu_raw.csv")
    shutil.rmtree(out / "ncu_work")
    (out / "ncu_dropped.txt").write_text("\n".join(run.dropped_metrics) + "\n")
    (out / "ncu_command.txt").write_text(" ".join(run.command) + "\n")
    names = [k.name[:60] for k in run.kernels]
    return f"{len(run.kernels)} kernels, dropped {run.dropped_metrics}: {names}"


def ncu_sections_header(out: Path) -> str:
    """Metric names ncu's own WarpStateStats/Occupancy sections use: ground truth for names."""
    log = out / "sections.csv"
    cmd = ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--csv",
           "--page", "raw", "--section", "WarpStateStats", "--section", "Occupancy",
           "--section", "ComputeWorkloadAnalysis", "--launch-count", "1",
           "--log-file", str(log), sys.executable, "-m",
           "kernelstitch.profiler.ncu_target", str(PROBLEM)]  # fmt: skip
    subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=180)
    header = next(line for line in log.read_text().splitlines() if line.startswith('"ID"'))
    names = [c.strip('"') for c in header.split('","')]
    (out / "ncu_sections_header.txt").write_text("\n".join(names) + "\n")
    log.unlink()
    return f"{len(names)} columns"


def torch_trace(out: Path) -> str:
    meta = tasks.torch_profile(str(PROBLEM), None, str(out / "torch_trace.json"), 3, 2)
    raw = (out / "torch_trace.json").read_bytes()
    (out / "torch_trace.json.gz").write_bytes(gzip.compress(raw))
    (out / "torch_trace.json").unlink()
    (out / "torch_profile_meta.json").write_text(json.dumps(meta, indent=1))
    return f"trace {len(raw)} bytes, forward {meta['forward_ms']:.3f} ms"


def peaks(out: Path) -> str:
    result = tasks.measure_device_peaks()
    (out / "device_peaks.json").write_text(json.dumps(result, indent=1))
    return {k: f"{v:.3e}" for k, v in result.items() if isinstance(v, float)}


def nsys_check(out: Path) -> str:
    found = shutil.which("nsys")
    lines = [f"which nsys: {found}"]
    for cand in Path("/opt/nvidia").glob("nsight-compute/*/host/target-linux-x64/nsys"):
        proc = subprocess.run([str(cand), "--version"], capture_output=True, text=True, check=False)
        lines.append(f"{cand}: rc={proc.returncode} {proc.stdout.strip()[:200]}")
    (out / "nsys_check.txt").write_text("\n".join(lines) + "\n")
    return "; ".join(lines)


def main() -> int:
    out = Path(os.environ.get("OUT_DIR", "capture_out"))
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {}
    step("ncu_version", lambda: subprocess.run(["ncu", "--version"], capture_output=True, check=False,
                                               text=True).stdout.strip().splitlines()[-1],
         summary)  # fmt: skip
    step("query_metrics", lambda: query_metrics(out), summary)
    step("ncu_profile", lambda: ncu_profile(out), summary)
    step("ncu_sections", lambda: ncu_sections_header(out), summary)
    step("torch_trace", lambda: torch_trace(out), summary)
    step("device_peaks", lambda: peaks(out), summary)
    step("nsys", lambda: nsys_check(out), summary)
    (out / "capture_summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for key, value in summary.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
