"""Tasks every worker offers; call them by bare name (`client.call("ping")`).

torch is imported inside the tasks, never at module level, so a worker starts fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any


def ping() -> dict[str, Any]:
    """Who answers: pid, Python and torch versions, and the CUDA device if there is one."""
    import torch

    cuda = torch.cuda.is_available()
    return {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_available": cuda,
        "device_name": torch.cuda.get_device_name(0) if cuda else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def preload(module: str) -> dict[str, Any]:
    """Import one of our modules now (a task's module, with torch), so a worker started ahead
    of time answers its real call without the import cost.  Our own package only: this runs
    no user code."""
    import importlib

    if module != "kernelstitch" and not module.startswith("kernelstitch."):
        raise ValueError(f"preload takes kernelstitch modules only, got {module!r}")
    start = time.perf_counter()
    imported = importlib.import_module(module)
    # A task module may name more start-up work of its own (driver init, lazy imports).
    warm_up = getattr(imported, "warm_up", None)
    if callable(warm_up):
        warm_up()
    return {"module": module, "seconds": time.perf_counter() - start}


def sleep(seconds: float) -> float:
    time.sleep(float(seconds))
    return float(seconds)


def _tensor_spec(value: Any) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return {"kind": "tensor", "shape": list(value.shape), "dtype": _dtype_name(value.dtype)}
    if isinstance(value, (bool, int, float, str)) or value is None:
        return {"kind": "value", "type": type(value).__name__, "value": value}
    return {"kind": "value", "type": type(value).__name__, "value": repr(value)[:200]}


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def describe_problem(path: str, module: str | None = None) -> dict[str, Any]:
    """Parameters, buffers and example inputs of a problem, built on the meta device.

    The meta device gives every shape and dtype without allocating memory or touching a GPU.
    """
    import torch

    from kernelstitch.core.problem import ProblemError, load_problem

    problem = load_problem(Path(path), module)
    with torch.device("meta"):
        model = problem.build()
        inputs = problem.inputs()
    if not isinstance(model, torch.nn.Module):
        raise ProblemError(f"{problem.info.name}(...) did not build a torch.nn.Module")
    return {
        "module": problem.info.name,
        "path": str(problem.path),
        "parameters": [
            {"name": name, "shape": list(p.shape), "dtype": _dtype_name(p.dtype)}
            for name, p in model.named_parameters()
        ],
        "buffers": [
            {"name": name, "shape": list(b.shape), "dtype": _dtype_name(b.dtype)}
            for name, b in model.named_buffers()
        ],
        "inputs": [_tensor_spec(value) for value in inputs],
    }
