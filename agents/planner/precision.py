"""The user's precision opt-in applied to a plan (issue 24).

A plan is made in strict fp32 and then given the precision the user allowed: the host setting
(forward holds TF32 on for the library calls it makes), every fp32 GEMM step's math and every
fp32 attention kernel's (its products on tensor cores in that precision).  One
function, applied to the default plan and to every measured variant, so no planning rule has to
know about precision and the plan states it (host.precision, the host reason, each GEMM spec).
"""

from __future__ import annotations

from dataclasses import replace

from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.kernel_spec import AttentionSpec, GemmSpec, spec_to_json
from kernelstitch.agents.planner.ops import GEMM_OPS, LIBRARY_OPS, base_op

from kernelstitch.core.precision import precision_mode

# Ops that run on the matrix units, where a reduced precision changes anything (the rest of a
# program computes in the module's dtypes whatever the precision): the planner's GEMM and
# library-call ops (convolutions, bmm, attention, recurrent layers) under any overload, and the
# batched products it leaves to PyTorch.
MATRIX_OPS = GEMM_OPS | LIBRARY_OPS
MATRIX_OP_NAMES = frozenset({base_op(op) for op in MATRIX_OPS} | {"baddbmm", "addbmm", "einsum",
                                                                 "_convolution"})


def uses_matrix_units(plan: Plan) -> bool:
    """Whether the plan's graph has a GEMM, convolution, attention or recurrent layer (True
    when the plan is not bound to a graph: nothing is known)."""
    if plan.graph is None:
        return True
    return any(node.op in MATRIX_OPS or base_op(node.op) in MATRIX_OP_NAMES
               for node in plan.graph.nodes)


def with_precision(plan: Plan, precision: str) -> Plan:
    """`plan` under `precision` (fp32: the plan itself; strict: the plan saying so).  A plan with
    nothing on the matrix units stays fp32: the precision would change nothing but the Verifier's
    bound (or, for strict, the settings of library calls it does not make)."""
    mode = precision_mode(precision)
    if plan.host.precision == mode.name or not uses_matrix_units(plan):
        return plan
    if mode.timed_tf32_off:
        # fp32's math; the user's process runs cuDNN in fp32 too, which the timing follows and
        # the planner's conv3xtf32 variant is for
        host = replace(plan.host, precision=mode.name, reasons=[
            *plan.host.reasons, f"precision {mode.name}: fp32 throughout, timed with TF32 off "
            "for cuBLAS and cuDNN (the user's process turns it off)"])
        return replace(plan, host=host)
    if not mode.reduced:  # fp32: the plan as made
        return plan
    steps = []
    gemms = attentions = 0
    for step in plan.steps:
        spec = step.kernel_spec() if step.is_kernel else None
        if isinstance(spec, GemmSpec) and spec.out_dtype == "float32":
            # the opt-in's own math supersedes 3xTF32 (fp32's accuracy is no longer the bound)
            step = replace(step, spec=spec_to_json(replace(spec, precision=mode.name, split_tf32=False)))
            gemms += 1
        elif not step.is_kernel and (step.spec or {}).get("split_tf32"):
            # a 3xTF32 convolution: the opt-in's TF32 convolutions supersede it
            step = replace(step, spec={k: v for k, v in step.spec.items() if k != "split_tf32"})
        elif isinstance(spec, AttentionSpec) and spec.query.dtype == "float32":
            step = replace(step, spec=spec_to_json(replace(spec, precision=mode.name)))
            attentions += 1
        steps.append(step)
    reason = (f"precision {mode.name} (the user's opt-in): "
              + (f"{gemms} GEMM step(s) on {mode.gemm}; " if gemms else "")
              + (f"{attentions} attention kernel(s) on tensor cores in {mode.name}; " if attentions else "")
              + f"PyTorch matmuls and convolutions in forward run {mode.library}; "
              f"fused kernels compute in the module's dtypes")
    host = replace(plan.host, precision=mode.name, reasons=[*plan.host.reasons, reason])
    return replace(plan, steps=steps, host=host)
