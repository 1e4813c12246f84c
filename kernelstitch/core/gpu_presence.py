"""Whether this machine can have a CUDA GPU at all, told without starting CUDA (torch-free).

Every GPU stage runs in a worker process that imports torch and asks CUDA: seconds of start-up
each.  On a machine without an NVIDIA driver a generate started three such workers (the search's
timing worker, the verifier's candidate and reference workers) to learn that there is no GPU:
about 4 of a CPU generate's 10 seconds (2026-11-27, 2-core VM).  This answers "certainly not"
only where the operating system shows no way to a GPU; anything else is "maybe", and the workers
find out as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Linux's NVIDIA driver nodes (nvidiactl, nvidia0..N, nvidia-uvm) and WSL2's GPU bridge.
DEVICE_GLOBS = ("nvidia*", "dxg")


def cuda_may_be_present(dev: Path = Path("/dev"), platform: str = sys.platform) -> bool:
    """False where no CUDA GPU can be: macOS, or Linux with no NVIDIA or WSL GPU device node."""
    if platform == "darwin":
        return False
    if platform.startswith("linux"):
        return any(any(dev.glob(pattern)) for pattern in DEVICE_GLOBS)
    return True
