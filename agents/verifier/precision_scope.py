"""The baselines' share of a reduced precision (issue 24): how eager PyTorch and torch.compile
are allowed the precision a candidate was generated for, so a speedup says what fusion adds on
top of the precision change (kernelstitch/core/precision.py's table).

tf32: TF32 allowed for cuBLAS and cuDNN (torch's legacy flags, what the Verifier's strict fp32
sets); bf16 / fp16: `torch.autocast` to that dtype, how users run a model in 16 bits, with TF32
allowed for what autocast keeps in fp32.  fp32: nothing changes (strict fp32).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from kernelstitch.core.precision import precision_mode


@contextlib.contextmanager
def baseline_precision(precision: str) -> Iterator[None]:
    """Runs the block with the reference allowed `precision`; the settings are restored after."""
    mode = precision_mode(precision)
    if not mode.reduced:
        yield
        return
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = mode.allow_tf32
    torch.backends.cudnn.allow_tf32 = mode.allow_tf32
    try:
        if mode.autocast_dtype:
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
