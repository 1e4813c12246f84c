"""NCHW <-> channels-last copies for the convolutions a plan runs channels-last: one extension
function, `ks_layout_swap(t, channels_last)`, the program's replacement for PyTorch's
`t.contiguous(memory_format=...)` before such a convolution (its input) and after it (an output
read by more than the kernels that read channels-last operands themselves).  Same result as
PyTorch's copy (same values, same strides); a coalesced tiled transpose instead of PyTorch's
permuted-copy kernel, which the H100 profiles measured at a third to two thirds of the DRAM
bandwidth on these shapes.

It belongs to no plan step: the program calls it (coder/program.py) and the coder adds it to
the extension once (coder/builtin.py).  Its kernel is cuda/layout/swap.cu.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render, substitute

LAYOUT_SWAP_FUNCTION = "ks_layout_swap"


def emit_layout_swap(name: str = LAYOUT_SWAP_FUNCTION, kernel_text: str | None = None) -> KernelSource:
    """The copy's extension function `name`; `kernel_text`: another revision of cuda/layout/swap.cu
    (its includes already inlined) in place of this tree's (bench/layout_swap_timing.py)."""
    launcher_sig = (f"void {name}_launch(const void* src, void* dst, int64_t N, int64_t R, int64_t K, "
                    "int elem_bytes, cudaStream_t stream)")
    fits_sig = f"bool {name}_fits(int64_t R, int64_t K, int elem_bytes)"
    values = {"name": name, "launcher_sig": launcher_sig, "fits_sig": fits_sig}
    return KernelSource(
        function=name,
        cuda=(render("layout/swap.cu", **values) if kernel_text is None
              else substitute(kernel_text.rstrip("\n"), values, "layout/swap.cu (another revision)")),
        binding=render("layout/swap_binding.cpp", name=name),
        launcher_decl=launcher_sig + ";\n" + fits_sig + ";",
        python_args=("t", "channels_last"),
        notes=("NCHW <-> channels-last copies around channels-last convolutions: 32 x 32 tiles "
               "through shared memory, four a block along the longer side",),
    )
