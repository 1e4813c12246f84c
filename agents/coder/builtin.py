"""The built-in coder: Plan + Graph -> Candidate, through the codegen emitters.

    candidate = code_builtin(plan, reference_path, output_path)   # plan bound to its graph
    write_candidate(candidate, out_dir)      # model_new.py, plan.json, kernels/<step>.cu

Capturing and planning in the same process is `kernelstitch.agents.inprocess.generate_builtin`
(tests, scripts); the coder never imports the planner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelstitch.agents.coder.codegen import (
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    KernelSource,
    build_extension_sources,
    emit,
)
from kernelstitch.agents.coder.codegen.conv_split import emit_split_cat
from kernelstitch.agents.coder.codegen.layout_swap import emit_layout_swap
from kernelstitch.agents.coder.layout import ChannelsLastReaders
from kernelstitch.agents.coder.program import CoderError, Program
from kernelstitch.agents.coder.signature import constructor_signature
from kernelstitch.agents.coder.wrapper import render_candidate
from kernelstitch.agents.plan import Plan, PlanError
from kernelstitch.agents.plan.kernel_spec import GemmSpec, spec_from_json

__all__ = [
    "Candidate",
    "CoderError",
    "code_builtin",
    "emit_kernel",
    "write_candidate",
]


@dataclass
class Candidate:
    source: str  # the model_new.py text
    plan: Plan
    kernels: list[KernelSource]
    torch_ops: dict[str, str]  # KERNELSTITCH_TORCH_OPS
    kernel_steps: dict[str, str] = field(default_factory=dict)  # step id -> kernel function

    def kernel_for_step(self, step_id: str) -> KernelSource:
        name = self.kernel_steps[step_id]
        return next(k for k in self.kernels if k.function == name)


def emit_kernel(spec: dict[str, Any]) -> KernelSource:
    """The kernel source of one step's spec JSON (spec_from_json rejects unknown types)."""
    return emit(spec_from_json(spec))


def code_builtin(plan: Plan, reference_path: str | Path, output_path: str | Path) -> Candidate:
    """Emit every kernel step and wrap them in ModelNew (output_path: where the file will live,
    so the reference can be found relative to it).  Every decision comes from the plan, bound
    to its graph (`Plan.bind`)."""
    full_graph = plan.graph
    if full_graph is None:
        raise CoderError("the plan is not bound to its graph (Plan.bind)")
    kernels: dict[str, KernelSource] = {}
    layout = ChannelsLastReaders(plan, full_graph)
    kept = layout.kept_steps()  # elementwise / pooling / cat steps whose output stays NHWC
    transposing = layout.transposing_cats()  # cats of NHWC inputs into an NCHW output
    for step in plan.steps:
        if step.is_kernel:
            try:
                spec = step.kernel_spec()
                if step.id in kept:
                    spec = replace(spec, keep_channels_last=True)
                elif step.id in transposing:
                    spec = replace(spec, channels_last_inputs=True)
                kernels[step.id] = emit(spec, step.reduction_knobs)
            except (PlanError, ValueError, KeyError) as exc:
                raise CoderError(f"step {step.id} ({step.description}): {exc}") from exc
    program = Program(plan, full_graph, kernels, layout)
    body = program.build()
    ordered = [kernels[s.id] for s in plan.steps if s.id in kernels]
    if program.splits_convolutions:  # 3xTF32 convolutions: their splitting pass, once
        ordered.append(emit_split_cat())
    if program.swaps_layouts:  # channels-last convolutions: the NCHW <-> NHWC copies, once
        ordered.append(emit_layout_swap())
    cpp, cuda, functions = build_extension_sources(ordered) if ordered else ("", "", [])
    needs_cublaslt = any(isinstance(s.kernel_spec(), GemmSpec) for s in plan.steps if s.is_kernel)
    reference_path = Path(reference_path).resolve()
    init_sig = constructor_signature(reference_path.read_text(encoding="utf-8"), plan.module)
    source = render_candidate(
        module=plan.module, source_path=reference_path, output_path=Path(output_path),
        plan_json=plan.to_json(), torch_ops=program.torch_ops, cpp=cpp, cuda=cuda,
        functions=functions, cflags=list(EXTRA_CFLAGS), cuda_cflags=list(EXTRA_CUDA_CFLAGS),
        ldflags=list(EXTRA_LDFLAGS) if needs_cublaslt else [], init_sig=init_sig,
        forward_inputs=[f"v_{n.name}" for n in full_graph.user_inputs()], body=body,
        cuda_graph=plan.host.cuda_graph, constants=dict(program.constants.values()),
        cudnn_benchmark=plan.host.cudnn_benchmark, precision=plan.host.precision,
        tf32_convolutions=program.splits_convolutions)
    return Candidate(source=source, plan=plan, kernels=ordered, torch_ops=dict(program.torch_ops),
                     kernel_steps={sid: k.function for sid, k in kernels.items()})


def write_candidate(candidate: Candidate, out_dir: str | Path) -> Path:
    """model_new.py, plan.json and kernels/<step>.cu (each .cu compiles alone with nvcc -c)."""
    out_dir = Path(out_dir)
    (out_dir / "kernels").mkdir(parents=True, exist_ok=True)
    for old in (out_dir / "kernels").glob("*.cu"):
        old.unlink()
    for step_id, function in candidate.kernel_steps.items():
        kernel = next(k for k in candidate.kernels if k.function == function)
        (out_dir / "kernels" / f"{step_id}.cu").write_text(kernel.cuda, encoding="utf-8")
    (out_dir / "plan.json").write_text(json.dumps(candidate.plan.to_json(), indent=2),
                                       encoding="utf-8")
    path = out_dir / "model_new.py"
    path.write_text(candidate.source, encoding="utf-8")
    return path
