"""A first-order cost model for ranking plan variants before any is built: each step's time is
its roofline floor (bytes over DRAM bandwidth, FLOPs over peak) plus a launch, and CUDA-graph
replay shrinks the launches.  It only orders the variants; the Verifier's measurements choose.

The default rates are an H100 SXM's (HBM3 about 3.35 TB/s, of which ~90% is reachable by a
streaming kernel; ~60 TFLOP/s of fp32 FMA, ~400 TFLOP/s of dense TF32 on the tensor cores; ~6 us of eager launch and dispatch per PyTorch op,
~2 us per kernel under graph replay); callers pass measured ones when they have them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelstitch.agents.plan import Plan


@dataclass(frozen=True)
class DeviceRates:
    bytes_per_s: float = 3.0e12
    flops_per_s: float = 6.0e13
    tf32_flops_per_s: float = 4.0e14
    launch_s: float = 6e-6
    replay_launch_s: float = 2e-6


def estimate_ms(plan: Plan, rates: DeviceRates | None = None) -> float:
    rates = rates or DeviceRates()
    per_launch = rates.replay_launch_s if plan.host.cuda_graph else rates.launch_s
    total = 0.0
    for step in plan.steps:
        if (step.spec or {}).get("split_tf32"):
            # 3xTF32: three tensor-core products, and the splitting pass (reads the operands once,
            # writes two copies: at most three times the step's own bytes) with two more launches
            floor = (max(step.estimated_bytes / rates.bytes_per_s,
                         3 * step.estimated_flops / rates.tf32_flops_per_s)
                     + 3 * step.estimated_bytes / rates.bytes_per_s)
            total += floor + 5 * per_launch
            continue
        floor = max(step.estimated_bytes / rates.bytes_per_s,
                    step.estimated_flops / rates.flops_per_s)
        total += floor + per_launch
        if step.channels_last:  # the NHWC copy of the input and, usually, the copy back
            total += 2 * step.estimated_bytes / rates.bytes_per_s / 3
    return total * 1e3
