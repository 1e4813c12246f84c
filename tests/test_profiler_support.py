"""Builders shared by the profiler tests (synthetic inputs; the real captures are fixtures)."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.profiler.findings import DevicePeaks, KernelStat
from kernelstitch.profiler.oplog import OpRecord, TensorRef

FIXTURES = Path(__file__).parent / "fixtures" / "profiler"

H100_LIKE = DevicePeaks(
    name="test-H100",
    dram_bytes_per_s=3.0e12,
    flops_per_s={"fp32": 5.0e13, "fp16": 7.0e14, "bf16": 7.0e14},
    sm_count=132,
)


def tensor(name: str, shape: list[int], dtype: str = "fp16") -> TensorRef:
    size = {"fp16": 2, "bf16": 2, "fp32": 4}[dtype]
    numel = 1
    for d in shape:
        numel *= d
    return TensorRef(id=name, shape=shape, dtype=dtype, nbytes=numel * size)


def op(index: int, func: str, line: int, inputs: list[TensorRef], outputs: list[TensorRef]):
    return OpRecord(index=index, func=func, line=line, lines=[line], module="",
                    inputs=inputs, outputs=outputs)  # fmt: skip


def kernel(name: str = "elementwise_kernel", us: float = 50.0, **kw) -> KernelStat:
    return KernelStat(name=name, calls=kw.pop("calls", 1), total_us=us, **kw)


def synthetic_trace(kernels: list[tuple[str, int, int, float]]) -> dict:
    """A chrome trace in torch.profiler's layout: (kernel name, op index, line, duration us).

    Each op gets a `ks:op` user annotation, an aten cpu_op and a cudaLaunchKernel inside it
    on the CPU thread, and the kernel on the GPU stream linked by correlation id.
    """
    events = []
    t = 1000.0
    for corr, (name, index, line, dur) in enumerate(kernels, start=1):
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ks:op{index}:L{line}",
             "pid": 1, "tid": 1, "ts": t, "dur": 30.0, "args": {}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1,
             "ts": t + 2, "dur": 20.0, "args": {"External id": corr}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 5, "dur": 4.0, "args": {"correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 40,
             "dur": dur, "args": {"correlation": corr, "grid": [264, 1, 1],
                                  "block": [128, 1, 1], "registers per thread": 32}},
        ]  # fmt: skip
        t += 100.0
    return {"traceEvents": events}
