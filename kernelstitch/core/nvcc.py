"""The nvcc that torch's extension builds run, and the options it takes.

Generated candidates carry their own copy of the split-compile probe (agents/coder/wrapper.py:
a generated file imports nothing of KernelStitch); this one serves the builds of tests and
benchmark scripts on the GPU machine.
"""

from __future__ import annotations

import functools
import os
import subprocess


def torch_nvcc() -> str:
    """The nvcc torch.utils.cpp_extension runs: $PYTORCH_NVCC, else CUDA_HOME's."""
    from torch.utils.cpp_extension import CUDA_HOME

    return os.environ.get("PYTORCH_NVCC") or os.path.join(CUDA_HOME or "", "bin", "nvcc")


@functools.lru_cache(maxsize=8)
def takes_split_compile(nvcc: str) -> bool:
    """Whether `nvcc` has --split-compile (CUDA 12 and later)."""
    try:
        done = subprocess.run([nvcc, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--split-compile" in done.stdout


def split_compile_flags(threads: int, nvcc: str | None = None) -> list[str]:
    """nvcc's parallel optimisation of one unit's kernels over `threads` (the same SASS: see
    README, the build), or nothing for one thread or an nvcc without the option."""
    if threads <= 1:
        return []
    return [f"--split-compile={threads}"] if takes_split_compile(nvcc or torch_nvcc()) else []
