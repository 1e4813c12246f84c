"""The user's precision opt-in applied to a plan (issue 24).

A plan is made in strict fp32 and then given the precision the user allowed: the host setting
(forward holds TF32 on for the library calls it makes) and every fp32 GEMM step's math.  One
function, applied to the default plan and to every measured variant, so no planning rule has to
know about precision and the plan states it (host.precision, the host reason, each GEMM spec).
"""

from __future__ import annotations

from dataclasses import replace

from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.kernel_spec import GemmSpec, spec_to_json

from kernelstitch.core.precision import precision_mode


def with_precision(plan: Plan, precision: str) -> Plan:
    """`plan` under `precision` (fp32: the plan itself)."""
    mode = precision_mode(precision)
    if not mode.reduced or plan.host.precision == mode.name:
        return plan
    steps = []
    gemms = 0
    for step in plan.steps:
        spec = step.kernel_spec() if step.is_kernel else None
        if isinstance(spec, GemmSpec) and spec.out_dtype == "float32":
            step = replace(step, spec=spec_to_json(replace(spec, precision=mode.name)))
            gemms += 1
        steps.append(step)
    reason = (f"precision {mode.name} (the user's opt-in): "
              + (f"{gemms} GEMM step(s) on {mode.gemm}; " if gemms else "")
              + f"PyTorch matmuls and convolutions in forward run {mode.library}; "
              f"fused kernels compute in the module's dtypes")
    host = replace(plan.host, precision=mode.name, reasons=[*plan.host.reasons, reason])
    return replace(plan, steps=steps, host=host)
