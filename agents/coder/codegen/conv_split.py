"""The splitting pass of a convolution run as 3xTF32 (a measured plan variant for transposed
convolutions, agents/planner/variants.py): one extension function, `ks_split_cat_tf32(t, dim,
weight_order)`, writes t's TF32-exact high part and fp32 remainder side by side along `dim`
([lo, hi, hi] for the input along its channels, [hi, lo, hi] for the weight), so that one TF32
convolution over three times the input channels computes x_lo W_hi + x_hi W_lo + x_hi W_hi.

It belongs to no plan step: the program calls it before each such convolution (coder/program.py)
and the coder adds it to the extension once (coder/builtin.py).  Its kernel is cuda/conv/split_cat.cu.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render

SPLIT_CAT_FUNCTION = "ks_split_cat_tf32"


def emit_split_cat() -> KernelSource:
    name = SPLIT_CAT_FUNCTION
    launcher_sig = (f"void {name}_launch(const void* src, void* dst, int64_t outer, int64_t len, "
                    "bool weight_order, cudaStream_t stream)")
    return KernelSource(
        function=name,
        cuda=render("conv/split_cat.cu", name=name, launcher_sig=launcher_sig),
        binding=render("conv/split_cat_binding.cpp", name=name),
        launcher_decl=launcher_sig + ";",
        python_args=("t", "dim", "weight_order"),
        notes=("3xTF32 convolution operands: TF32 high parts and fp32 remainders side by side along "
               "the input channels",),
    )
