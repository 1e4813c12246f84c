"""Arg-reduce emitter: torch.argmax / torch.argmin along one dim (or over every element), with
the elementwise ops before it (prologue) in the same kernel, so the compared value is never
stored (cuda/arg_reduce/).

The binding views the broadcast shape as [outer, R, inner] at run time: a block of 32-256 threads
per row when the dim is the contiguous one (shuffles, then shared memory), else a thread per
column walking R in order.  Values are compared in fp32 (exact for 16-bit storage); the indices
are int64, the first one on ties, a NaN winning as in torch.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    binding_operands,
    check_identifier,
    one_pass_operands,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import ArgReduceSpec

COMPARE = {"argmax": ">", "argmin": "<"}

# [outer, R, inner] and the output's shape from the plan's dim (normalised against this call's rank).
_ALL_ELEMENTS = """if ({keepdim}) out_shape.assign((size_t)rank, 1);"""
_ONE_DIM = """int64_t dim = {dim};
  TORCH_CHECK(dim >= -(rank > 0 ? rank : 1) && dim < (rank > 0 ? rank : 1), "{name}: dim ", ks_str(dim),
              " out of range for ", ks_str(rank), " dims");
  if (dim < 0) dim += rank > 0 ? rank : 1;
  if (rank > 0) {{
    outer = 1; R = shape[dim]; inner = 1;
    for (int64_t k = 0; k < dim; ++k) outer *= shape[k];
    for (int64_t k = dim + 1; k < rank; ++k) inner *= shape[k];
    for (int64_t k = 0; k < rank; ++k)
      if (k != dim) out_shape.push_back(shape[k]);
      else if ({keepdim}) out_shape.push_back(1);
  }}"""


def emit_arg_reduce(spec: ArgReduceSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.kind not in COMPARE:
        raise ValueError(f"{name}: unknown arg-reduce kind {spec.kind!r}")
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, "
                    "int64_t outer, int64_t R, int64_t inner, cudaStream_t stream)")
    cuda = render(
        "arg_reduce/kernel.cu", name=name, kind=spec.kind, cmp=COMPARE[spec.kind], launcher_sig=launcher_sig,
        **one_pass_operands(name, spec.inputs, spec.prologue, spec.prologue_out, "compared"),
    )
    keepdim = "true" if spec.keepdim else "false"
    dim_setup = (_ALL_ELEMENTS.format(keepdim=keepdim) if spec.dim is None
                 else _ONE_DIM.format(dim=int(spec.dim), name=name, keepdim=keepdim))
    binding = render(
        "arg_reduce/binding.cpp", name=name, kind=spec.kind, dim_setup=dim_setup,
        **binding_operands(name, spec.inputs),
    )
    over = "every element" if spec.dim is None else f"dim {spec.dim}"
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            f"{spec.kind} over {over} with its prologue fused: a block per contiguous row "
            "(shuffles, shared memory), a thread per column otherwise; int64 indices",
            "fp32 comparison; operands through run-time descriptors",
        ),
    )
