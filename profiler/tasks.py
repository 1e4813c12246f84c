"""GPU-side routines run inside worker processes (`"kernelstitch.profiler.tasks:NAME"`).

Each takes and returns JSON-able values, so a WorkerClient can call it in a fresh interpreter and
tests can call it directly.  torch is imported inside each function: importing this module is
cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _to_cuda(values: list[Any]) -> list[Any]:
    import torch

    return [v.cuda() if isinstance(v, torch.Tensor) else v for v in values]


def _tensor_bytes(values: Any) -> int:
    import torch

    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(_tensor_bytes(v) for v in values)
    if isinstance(values, dict):
        return sum(_tensor_bytes(v) for v in values.values())
    return 0


def device_info() -> dict[str, Any]:
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", 0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def torch_profile(
    path: str,
    module: str | None = None,
    trace_path: str = "trace.json",
    warmup: int = 3,
    iters: int = 3,
) -> dict[str, Any]:
    """Profile `iters` forwards with torch.profiler, each torch call bracketed by a `ks:op`
    range (oplog.py) that names its source line; write the chrome trace and return the op log.

    Also times the forward with CUDA events outside the profiler (its own overhead inflates
    host time) and reports the compulsory traffic: inputs + parameters + outputs.
    """
    import torch
    from kernelstitch.profiler.oplog import make_recorder
    from torch.profiler import ProfilerActivity, profile

    from kernelstitch.core.cuda_timing import CudaTimer
    from kernelstitch.core.problem import load_problem

    if not torch.cuda.is_available():
        return {"error": "no CUDA device"}
    problem = load_problem(Path(path), module)
    model = problem.build().cuda().eval()
    inputs = _to_cuda(problem.inputs())
    with torch.no_grad():
        for _ in range(warmup):
            out = model(*inputs)
        torch.cuda.synchronize()
        # Timed runs without the profiler: GPU time per forward and host wall time per forward.
        span = CudaTimer().span(model, *inputs, repeat=max(iters, 10))
        wall_ms, gpu_ms = span.wall_ms, span.gpu_ms
        recorder = make_recorder(
            str(Path(path).resolve()), {id(m): name for name, m in model.named_modules()}
        )
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            record_shapes=True,
            with_stack=False,  # Python frames come from our ks:op ranges (see oplog.py)
        ) as prof:
            with recorder:
                for i in range(iters):
                    recorder.next_index, recorder.keep = 0, i == 0
                    out = model(*inputs)
            torch.cuda.synchronize()
    Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    param_bytes += sum(b.numel() * b.element_size() for b in model.buffers())
    return {
        "trace_path": str(trace_path),
        "problem_path": str(Path(path).resolve()),
        "module": problem.info.name,
        "iters": iters,
        "forward_ms": gpu_ms,
        "forward_wall_ms": wall_ms,
        "input_bytes": _tensor_bytes(inputs),
        "output_bytes": _tensor_bytes(out),
        "param_bytes": param_bytes,
        "device": device_info(),
        "ops": [op.to_dict() for op in recorder.ops],
    }


def measure_device_peaks(copy_mib: int = 1024, matmul_n: int = 8192) -> dict[str, Any]:
    """Achievable DRAM bandwidth (device-to-device copy, read+write bytes) and matmul throughput.

    These are the "achievable floor" references: measured, not datasheet, numbers.
    """
    import torch

    from kernelstitch.core.cuda_timing import CudaTimer

    timer = CudaTimer()

    def best_ms(fn, reps: int = 10) -> float:
        # the achievable peak: the best run, not a typical one
        return min(timer.samples_ms(fn, runs=reps, warmup=3))

    n_bytes = copy_mib * 2**20
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = best_ms(lambda: dst.copy_(src))
    src = dst = None  # free 2 GiB before the matmuls
    result: dict[str, Any] = {"dram_bytes_per_s": 2 * n_bytes / (copy_ms * 1e-3)}
    for dtype, key in ((torch.bfloat16, "bf16"), (torch.float16, "fp16"), (torch.float32, "fp32")):
        n = matmul_n if dtype != torch.float32 else matmul_n // 2
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        ms = best_ms(lambda a=a, b=b: a @ b, reps=5)
        result[f"{key}_flops_per_s"] = 2 * n**3 / (ms * 1e-3)
    result["device"] = device_info()
    return result
