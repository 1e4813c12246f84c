"""The numeric settings programs are timed under (correctness is checked in strict fp32).

strict: TF32 off for cuBLAS and cuDNN, for users whose process turns it off.

fp32 (the default): PyTorch's own defaults, what a user's process runs the original and the
delivered program with unless it changes them: cuDNN convolutions and RNNs in TF32, cuBLAS
matmuls in fp32 (torch 2.x).  Timing both in strict fp32 instead made the originals of convolution
problems 2-2.3x slower than the user runs them (KernelBench's published eager times agreed with
ours on GEMM problems and not on convolutions, 2026-11-27) and credited a candidate with beating
a baseline nobody runs.

A reduced precision (issue 24): eager PyTorch and torch.compile are allowed the precision a
candidate was generated for, so a speedup says what fusion adds on top of the precision change
(kernelstitch/core/precision.py's table).  tf32: TF32 allowed for cuBLAS and cuDNN (torch's legacy
flags, what the Verifier's strict fp32 sets); bf16 / fp16: `torch.autocast` to that dtype, how
users run a model in 16 bits, with TF32 allowed for what autocast keeps in fp32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from kernelstitch.agents.verifier.gpu_common import PYTORCH_DEFAULTS

from kernelstitch.core.precision import precision_mode


@contextlib.contextmanager
def baseline_precision(precision: str) -> Iterator[None]:
    """Runs the block with the reference allowed `precision` (fp32: PyTorch's defaults); the
    settings are restored after."""
    mode = precision_mode(precision)
    if mode.reduced:
        matmul, cudnn = mode.allow_tf32, mode.allow_tf32
    else:
        matmul, cudnn = (False, False) if mode.timed_tf32_off else PYTORCH_DEFAULTS
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn
    try:
        if mode.reduced and mode.autocast_dtype:
            # no cast cache: a CUDA graph captured in the region (the graphed original) would
            # replay casts the cache freed when the region ended (the bf16 timing worker failed
            # on an H100 with the cache on)
            with torch.autocast("cuda", dtype=getattr(torch, mode.autocast_dtype),
                                cache_enabled=False):
                yield
        else:
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def timing_settings(precision: str):
    """The settings a program generated for `precision` is timed under: the user's (PyTorch's
    defaults, or TF32 off under `strict`); a reduced program sets its own precision inside its
    forward."""
    return baseline_precision(precision if not precision_mode(precision).reduced else "fp32")


def pytorch_defaults():
    """PyTorch's default settings (cuDNN convolutions and RNNs in TF32, matmuls in fp32)."""
    return baseline_precision("fp32")
