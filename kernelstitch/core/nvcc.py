"""The nvcc that torch's extension builds run, and the options it takes.

Generated candidates carry their own copy of the split-compile probe (agents/coder/wrapper.py:
a generated file imports nothing of KernelStitch); this one serves the GPU tests' extension
builds (tests/test_codegen_gpu.py's load_kernels).
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess


def torch_nvcc() -> str | None:
    """The nvcc command torch.utils.cpp_extension runs: $PYTORCH_NVCC (a command line, such as
    `ccache nvcc`), else CUDA_HOME's; None without either."""
    from torch.utils.cpp_extension import CUDA_HOME

    if os.environ.get("PYTORCH_NVCC"):
        return os.environ["PYTORCH_NVCC"]
    return os.path.join(CUDA_HOME, "bin", "nvcc") if CUDA_HOME else None


@functools.lru_cache(maxsize=8)
def takes_split_compile(nvcc: str) -> bool:
    """Whether the nvcc command line `nvcc` has --split-compile (CUDA 12 and later)."""
    try:
        done = subprocess.run([*shlex.split(nvcc), "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError, ValueError):
        return False
    return "--split-compile" in done.stdout


def split_compile_flags(threads: int, nvcc: str | None = None) -> list[str]:
    """nvcc's parallel optimisation of one unit's kernels over `threads` (the same SASS: see
    README, the build), or nothing for one thread or an nvcc without the option."""
    command = nvcc or torch_nvcc()
    if threads <= 1 or not command:
        return []
    return [f"--split-compile={threads}"] if takes_split_compile(command) else []
