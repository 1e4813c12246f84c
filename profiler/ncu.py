"""Nsight Compute backend: build the `ncu` command, run it, parse its raw-page CSV.

Torch-free: the profiled process is `kernelstitch.profiler.ncu_target`, which wraps the measured
forward in cudaProfilerStart/Stop so `--profile-from-start off` keeps warm-up kernels out.
Clocks are never locked (`--clock-control none`): the GPU is shared, and locked base clocks
would understate what the user's code gets.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# Metric names checked against `ncu --query-metrics` on an H100 (see tests/fixtures/profiler).
DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
REGISTERS = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
BLOCK_SIZE = "launch__block_size"
GRID_SIZE = "launch__grid_size"
WAVES = "launch__waves_per_multiprocessor"
LIMIT_REGISTERS = "launch__occupancy_limit_registers"
LIMIT_SMEM = "launch__occupancy_limit_shared_mem"
LIMIT_WARPS = "launch__occupancy_limit_warps"
LIMIT_BLOCKS = "launch__occupancy_limit_blocks"
SM_COUNT = "device__attribute_multiprocessor_count"
LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
ST_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
L2_HIT = "lts__t_sector_hit_rate.pct"
TENSOR_HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_GMMA_PCT = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_INST = "sm__inst_executed_pipe_tensor_op_hmma.sum"
TENSOR_GMMA_INST = "sm__inst_executed_pipe_tensor_op_gmma.sum"
BYTES_PER_SECTOR_LD_PCT = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
LOCAL_LD = "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"
LOCAL_ST = "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"

STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "mio_throttle",
    "lg_throttle",
    "barrier",
    "math_pipe_throttle",
    "wait",
    "not_selected",
    "membar",
    "tex_throttle",
    "dispatch_stall",
    "no_instruction",
    "drain",
    "imc_miss",
    "branch_resolving",
    "sleeping",
)
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"


def stall_metric(reason: str) -> str:
    return f"{STALL_PREFIX}{reason}{STALL_SUFFIX}"


DEFAULT_METRICS: tuple[str, ...] = (
    DURATION, DRAM_PCT, MEMORY_PCT, SM_PCT, DRAM_READ, DRAM_WRITE,
    ACHIEVED_OCCUPANCY, THEORETICAL_OCCUPANCY, REGISTERS, SMEM_STATIC, SMEM_DYNAMIC,
    BLOCK_SIZE, GRID_SIZE, WAVES, LIMIT_REGISTERS, LIMIT_SMEM, LIMIT_WARPS, LIMIT_BLOCKS,
    SM_COUNT, LD_SECTORS, LD_REQUESTS, ST_SECTORS, ST_REQUESTS, L2_HIT, BYTES_PER_SECTOR_LD_PCT,
    TENSOR_HMMA_PCT, TENSOR_GMMA_PCT, TENSOR_INST, TENSOR_GMMA_INST, LOCAL_LD, LOCAL_ST,
    *(stall_metric(r) for r in STALL_REASONS),
)  # fmt: skip

# Columns of the raw page that describe the launch rather than measure it.
_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
               "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name"}  # fmt: skip

# Unit scales to base units (nanoseconds, bytes, per-second); ncu's units row says which.
_UNIT_SCALE = {
    "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "KB": 1e3, "MB": 1e6, "GB": 1e9,
    "Kibyte": 2**10, "Mibyte": 2**20, "Gibyte": 2**30,
}  # fmt: skip
_BASE_UNIT = {"nsecond": "ns", "usecond": "ns", "msecond": "ns", "second": "ns"}


@dataclass
class NcuKernel:
    """One profiled kernel launch from the raw page: name and metrics in base units."""

    index: int
    name: str
    metrics: dict[str, float] = field(default_factory=dict)
    block: str = ""
    grid: str = ""


class NcuError(Exception):
    pass


def ncu_available() -> str | None:
    return shutil.which("ncu")


def parse_number(text: str) -> float | None:
    """'1,234.5' -> 1234.5; 'n/a' or '' -> None.  ncu prints thousands separators in CSV."""
    text = text.strip().replace(",", "")
    if not text or text.lower() in {"n/a", "nan", "-"}:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _scale(unit: str) -> float:
    return _UNIT_SCALE.get(unit.strip(), 1.0)


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Parse `ncu --csv --page raw` output: a header row, a units row, one row per kernel.

    Lines before the header (==PROF== messages, program output) are skipped.  Numbers are
    converted to base units: durations in nanoseconds, sizes in bytes.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise NcuError('no CSV header ("ID",...) in ncu output')
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, rows = rows[0], rows[1:]
    units: list[str] = [""] * len(header)
    if rows and not rows[0][0].strip():  # the units row has an empty ID
        units, rows = rows[0], rows[1:]
    kernels = []
    for row in rows:
        if len(row) != len(header):
            continue  # a program line that happens to contain commas
        values = dict(zip(header, row))
        metrics: dict[str, float] = {}
        for col, unit in zip(header, units):
            if col in _ID_COLUMNS:
                continue
            number = parse_number(values[col])
            if number is not None:
                metrics[col] = number * _scale(unit)
        kernels.append(
            NcuKernel(
                index=int(parse_number(values.get("ID", "0")) or 0),
                name=values.get("Kernel Name", ""),
                metrics=metrics,
                block=values.get("Block Size", ""),
                grid=values.get("Grid Size", ""),
            )
        )
    return kernels


def ncu_command(
    problem: Path,
    module: str | None,
    log_file: Path,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    kernel_regex: str | None = None,
    launch_skip: int = 0,
    launch_count: int = 500,
    python: str = sys.executable,
    ncu: str = "ncu",
    formatting: bool = True,
) -> list[str]:
    cmd = [
        ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
        *(["--print-units", "base", "--print-kernel-base", "demangled"] if formatting else []),
        "--metrics", ",".join(metrics),
        "--launch-skip", str(launch_skip), "--launch-count", str(launch_count),
        "--log-file", str(log_file), "--force-overwrite",
    ]  # fmt: skip
    if kernel_regex:
        cmd += ["-k", f"regex:{kernel_regex}"]
    cmd += [python, "-m", "kernelstitch.profiler.ncu_target", str(problem)]
    if module:
        cmd += ["--module", module]
    return cmd


_UNKNOWN_METRIC = re.compile(r"Failed to find metric (?:regex:)?([\w.]+)")


@dataclass
class NcuRun:
    kernels: list[NcuKernel]
    dropped_metrics: list[str]
    command: list[str]
    raw_csv: str


def run_ncu(
    problem: Path,
    module: str | None,
    work_dir: Path,
    metrics: tuple[str, ...] = DEFAULT_METRICS,
    timeout_s: float = 300.0,
    **filters,
) -> NcuRun:
    """Run ncu on the problem's forward.  Metrics this ncu/GPU does not know are dropped (and
    reported) and the run retried, so one renamed counter does not lose the whole profile."""
    ncu = ncu_available()
    if not ncu:
        raise NcuError("ncu is not on PATH")
    work_dir.mkdir(parents=True, exist_ok=True)
    log_file = work_dir / "ncu_raw.csv"
    wanted, dropped = list(metrics), []
    formatting = True
    for _ in range(8):
        cmd = ncu_command(
            problem, module, log_file, tuple(wanted), ncu=ncu, formatting=formatting, **filters
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s)
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        unknown = set(_UNKNOWN_METRIC.findall(proc.stdout + proc.stderr + log))
        unknown &= set(wanted)
        if unknown:
            dropped += sorted(unknown)
            wanted = [m for m in wanted if m not in unknown]
            continue
        if '"ID"' not in log and formatting and "option" in (proc.stderr + proc.stdout).lower():
            formatting = False  # an older ncu without --print-units/--print-kernel-base
            continue
        if '"ID"' not in log:
            tail = (proc.stderr or proc.stdout or log)[-2000:]
            raise NcuError(f"ncu produced no kernel rows (exit {proc.returncode}): {tail}")
        return NcuRun(parse_ncu_csv(log), dropped, cmd, log)
    raise NcuError(f"ncu kept rejecting metrics; dropped so far: {dropped}")
