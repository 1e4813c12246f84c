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


def _name(owner: object, attr: str) -> str:
    return f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}"


def snapshot() -> dict[str, object]:
    return {_name(o, a): getattr(o, a, None) for o, a in TIMER_ATTRS + RUNTIME_ATTRS}


def changed(before: dict[str, object]) -> list[tuple[str, str]]:
    """(code, name) for every attribute that is no longer the object recorded in `before`."""
    timer_names = {_name(o, a) for o, a in TIMER_ATTRS}
    now = snapshot()
    found = []
    for name, value in before.items():
        if now.get(name) is not value:
            found.append(("timer_tampering" if name in timer_names else "monkeypatches_runtime",
                          name))
    return found
