"""Detect candidate code that replaced runtime functions in its process.

The identities of sensitive attributes are recorded before the candidate is imported and
compared after import and after its calls.  Timing-related ones map to timer_tampering, the
rest to monkeypatches_runtime.  torch replaces one attribute itself when torch._dynamo is first
imported (`torch.manual_seed` gets wrapped), so that import happens here, before any snapshot:
on the GPU run without it every honest candidate was flagged.
"""

from __future__ import annotations

import builtins
import time

import torch
import torch._dynamo  # its import wraps torch.manual_seed once: do it before snapshots

TIMER_ATTRS = [
    (torch.cuda, "Event"), (torch.cuda.Event, "record"), (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "synchronize"), (torch.cuda, "synchronize"), (torch.cuda, "Stream"),
    (torch.cuda, "current_stream"), (torch.cuda, "stream"), (time, "perf_counter"),
    (time, "time"), (time, "monotonic"), (time, "perf_counter_ns"), (torch.profiler, "profile"),
    (torch.profiler, "record_function"),
]
RUNTIME_ATTRS = [
    (torch, "manual_seed"), (torch, "allclose"), (torch, "equal"), (torch, "isfinite"),
    (torch, "isnan"), (torch, "load"), (torch, "save"), (torch, "empty"), (torch, "empty_like"),
    (torch.Tensor, "cpu"), (torch.Tensor, "clone"), (torch.Tensor, "copy_"),
    (torch.Tensor, "to"), (torch.Tensor, "__eq__"), (torch.Tensor, "data_ptr"),
    (torch.nn.Module, "__call__"), (torch.nn.Module, "load_state_dict"),
    (builtins, "setattr"), (builtins, "isinstance"),
]


# Process-wide numeric settings the reference is timed and compared under (gpu_common.strict_fp32
# sets two of them): a candidate may change one inside its forward (the built-in coder's cuDNN
# autotuning does, and restores it) but must leave each as it found it, or the original timed
# after it in the same process would run differently.
def _fp32_precision(backend: str, op: str):
    """torch's per-op fp32 precision (torch.backends.cudnn.conv.fp32_precision and kin; None on a
    torch without them)."""
    getter = getattr(torch._C, "_get_fp32_precision_getter", None)
    return getter(backend, op) if getter is not None else None


SETTINGS = [
    ("torch.backends.cudnn.enabled", lambda: torch.backends.cudnn.enabled),
    ("torch.backends.cudnn.benchmark", lambda: torch.backends.cudnn.benchmark),
    ("torch.backends.cudnn.deterministic", lambda: torch.backends.cudnn.deterministic),
    ("torch.backends.cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
    ("torch.backends.cuda.matmul.allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
    ("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
     lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction),
    ("torch.get_float32_matmul_precision", torch.get_float32_matmul_precision),
    # the per-op forms (a candidate may leave TF32 on through them as well; the built-in coder's
    # 3xTF32 convolutions set the conv one for one call and restore it)
    ("torch.backends.cudnn.conv.fp32_precision", lambda: _fp32_precision("cuda", "conv")),
    ("torch.backends.cudnn.rnn.fp32_precision", lambda: _fp32_precision("cuda", "rnn")),
    ("torch.backends.cuda.matmul.fp32_precision", lambda: _fp32_precision("cuda", "matmul")),
]
SETTING_SUFFIX = " (a setting)"


def _name(owner: object, attr: str) -> str:
    return f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}"


def snapshot() -> dict[str, object]:
    return {_name(o, a): getattr(o, a, None) for o, a in TIMER_ATTRS + RUNTIME_ATTRS}


def settings() -> dict[str, object]:
    """The SETTINGS' values now: recorded once the task has set them (strict_fp32), just before
    the candidate runs, and merged into the `before` that `changed` compares with."""
    return {name + SETTING_SUFFIX: _read(read) for name, read in SETTINGS}


def _read(read) -> object:
    """A setting's value, or why it cannot be read: torch raises on the legacy TF32 flags once
    the per-op ones were set differently, and a candidate that leaves them so has changed them."""
    try:
        return read()
    except RuntimeError as exc:
        return f"unreadable: {str(exc)[:80]}"


def is_setting(name: str) -> bool:
    """Whether a `changed` name is one of the SETTINGS (compared by value, not identity)."""
    return name.endswith(SETTING_SUFFIX)


def describe(name: str) -> str:
    """What happened to a `changed` name, for the rejection's message."""
    if is_setting(name):
        return f"{name.removesuffix(SETTING_SUFFIX)} was changed and not restored"
    return f"{name} was replaced at run time"


def changed(before: dict[str, object]) -> list[tuple[str, str]]:
    """(code, name) for every attribute that is no longer the object recorded in `before`, and
    every setting in `before` whose value changed."""
    timer_names = {_name(o, a) for o, a in TIMER_ATTRS}
    now = {**snapshot(), **settings()}
    found = []
    for name, value in before.items():
        if (now.get(name) != value) if is_setting(name) else (now.get(name) is not value):
            found.append(("timer_tampering" if name in timer_names else "monkeypatches_runtime",
                          name))
    return found
