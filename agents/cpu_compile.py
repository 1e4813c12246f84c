"""Without a GPU, the built-in coder's kernels are still compiled, by nvcc for sm_90a, where
nvcc is installed: a candidate that was written but not run says plainly whether its CUDA
compiles ("compiled for sm_90a, not run") or why not ("not compiled: ...") instead of a
"compiling" stage that compiled nothing (issue 27).  The raw kernel files need no torch headers;
the C++ binding, which does, is only built where a GPU is.

KERNELSTITCH_CPU_NVCC=0 turns it off (the test suite does, but for the test of this module:
every CPU test that generates would otherwise spend minutes in ptxas)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kernelstitch.agents.coder.codegen.common import renamed_kernel

NVCC_ARCH = "sm_90a"
NVCC_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-c")
ENV_SWITCH = "KERNELSTITCH_CPU_NVCC"


@dataclass(frozen=True)
class CpuCompile:
    compiled: bool  # every kernel file compiled
    note: str  # one sentence for the message and the report


def compile_without_gpu(kernel_dir: Path, timeout_s: float = 600.0) -> CpuCompile | None:
    """None when there is nothing of ours to compile (no kernel files)."""
    all_files = sorted(Path(kernel_dir).glob("*.cu"))
    if not all_files:
        return None
    files = _distinct(all_files)
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return CpuCompile(False, f"kernels not compiled ({ENV_SWITCH}=0)")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return CpuCompile(False, "kernels not compiled: no GPU and no nvcc here")
    with tempfile.TemporaryDirectory(prefix="ks_nvcc_") as tmp:
        def one(path: Path) -> tuple[Path, subprocess.CompletedProcess | None]:
            try:
                return path, subprocess.run([nvcc, *NVCC_FLAGS, str(path), "-o", str(Path(tmp) / f"{path.stem}.o")],
                                            capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                return path, None

        with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1, len(files)))) as pool:
            results = list(pool.map(one, files))
    for path, done in results:
        if done is None:
            return CpuCompile(False, f"kernels not compiled: nvcc took over {timeout_s:.0f} s on {path.name}")
        if done.returncode != 0:
            errors = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line]
            first = errors[0].strip() if errors else (done.stderr.strip().splitlines() or ["?"])[-1]
            return CpuCompile(False, f"the kernels do not compile for {NVCC_ARCH}: {path.name}: {first}")
    distinct = "" if len(files) == len(all_files) else f", {len(files)} distinct"
    return CpuCompile(True, f"kernels compiled for {NVCC_ARCH} by nvcc ({len(all_files)} file(s){distinct}), "
                            "not run: no GPU here")


def _distinct(files: list[Path]) -> list[Path]:
    """One file per kernel text, the step's own name aside (`ks_<step>_...`, as the coder names
    them): a ResNet's identical steps are compiled once, as the extension build does."""
    seen: dict[str, Path] = {}
    for path in files:
        text = renamed_kernel(path.read_text(encoding="utf-8"), f"ks_{path.stem}")
        seen.setdefault(text, path)
    return list(seen.values())
