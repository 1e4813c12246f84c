"""Pieces both worker tasks share: device choice, strict fp32, profiling a forward call."""

from __future__ import annotations

import importlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

CUDA_FATAL_MARKERS = ("illegal memory access", "device-side assert", "CUDA error: unspecified",
                      "misaligned address", "illegal instruction", "an illegal",
                      "CUDA error: an")


def warm_start(*modules: str) -> None:
    """Start-up work a pre-started worker does before its task arrives (no user code): the
    CUDA driver's initialisation (not a context) and the given lazy imports."""
    torch.cuda.is_available()
    for module in modules:
        importlib.import_module(module)


def pick_device(index: int | None) -> torch.device:
    device = torch.device("cuda", index if index is not None else torch.cuda.current_device())
    torch.cuda.set_device(device)
    return device


# (cuBLAS TF32, cuDNN TF32) as torch sets them by default, read when this module is imported: in
# a worker that is at start-up, before strict_fp32() below can run and before any user or
# candidate code.  Programs are timed under these (precision_scope.py), checked under strict fp32.
PYTORCH_DEFAULTS: tuple[bool, bool] = (torch.backends.cuda.matmul.allow_tf32,
                                       torch.backends.cudnn.allow_tf32)


def strict_fp32() -> None:
    """Correctness compares against true fp32: TF32 would hide (or fake) precision loss."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def is_cuda_fatal(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in CUDA_FATAL_MARKERS)


def profile_calls(fn: Callable[[int], Any], calls: int, with_cuda: bool,
                  profiler_profile=None, record_function=None) -> dict[str, Any]:
    """Run fn(i) for i < calls, each inside `ks_verify_call_<i>`; return the chrome trace."""
    profile = profiler_profile or torch.profiler.profile
    record = record_function or torch.profiler.record_function
    activities = [torch.profiler.ProfilerActivity.CPU]
    if with_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    if with_cuda:  # a throwaway session first: CUPTI's first session can miss early kernels
        with profile(activities=activities):
            fn(-1)
            torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for i in range(calls):
            with record(f"ks_verify_call_{i}"):
                fn(i)
        if with_cuda:
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text(encoding="utf-8"))


def storage_ranges(values: list[Any]) -> list[tuple[int, int]]:
    """[start, end) byte ranges of the storages behind the non-empty tensors in `values`."""
    ranges = []
    for v in values:
        if isinstance(v, torch.Tensor) and v.numel():
            start = v.untyped_storage().data_ptr()
            ranges.append((start, start + v.untyped_storage().nbytes()))
    return ranges


def ranges_overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> bool:
    return any(lo < hi2 and lo2 < hi for lo, hi in a for lo2, hi2 in b)


def as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a tensor (NaN == NaN when comparing these)."""
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def describe_exception(exc: BaseException) -> str:
    chain = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 4:
        chain.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(chain)
