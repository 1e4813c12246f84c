"""Whether this machine can have a CUDA GPU at all, told without starting CUDA (torch-free).

Every GPU stage runs in a worker process that imports torch and asks CUDA: seconds of start-up
each.  On a machine without an NVIDIA driver a generate started three such workers (the search's
timing worker, the verifier's candidate and reference workers) to learn that there is no GPU:
about 6 of a CPU generate's 10 seconds (2026-11-27, 2-core VM).  This answers "certainly not"
only where the operating system shows no way to a GPU: no device node and no CUDA driver library;
anything else is "maybe", and the workers find out as before.
"""

from __future__ import annotations

import ctypes.util
import functools
import sys
from pathlib import Path

# Linux's NVIDIA driver nodes (nvidiactl, nvidia0..N, nvidia-uvm) and WSL2's GPU bridge.
DEVICE_GLOBS = ("nvidia*", "dxg")


def cuda_may_be_present(dev: Path = Path("/dev"), platform: str = sys.platform,
                        driver_library: bool | None = None) -> bool:
    """False where no CUDA GPU can be: macOS, or Linux with neither an NVIDIA or WSL GPU device
    node nor the CUDA driver library (`driver_library`: None looks it up)."""
    if platform == "darwin":
        return False
    if platform.startswith("linux"):
        if any(any(dev.glob(pattern)) for pattern in DEVICE_GLOBS):
            return True
        return _driver_library() if driver_library is None else driver_library
    return True


@functools.cache
def _driver_library() -> bool:
    """Whether libcuda (the driver's, not the toolkit's stub) is on the loader's path."""
    return ctypes.util.find_library("cuda") is not None
