"""What an emitter returns for one kernel spec."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KernelSource:
    """What an emitter returns for one spec.

    `cuda` is CUDA C++ that includes only CUDA headers (it compiles with plain `nvcc -c`, no
    torch): the __global__ kernels and a host launcher `launcher` taking raw pointers, sizes and
    a cudaStream_t.  `binding` is C++ against torch (at::Tensor) that validates arguments,
    allocates outputs, computes run-time sizes/strides and calls the launcher on the current
    stream; it defines `function` (exposed to Python).  `launcher_decl` is the launcher's
    prototype, placed in the binding translation unit.
    """

    function: str
    cuda: str
    binding: str
    launcher_decl: str
    python_args: tuple[str, ...]  # argument names, in call order (tensors, then scalars)
    notes: tuple[str, ...] = field(default_factory=tuple)  # habits applied, for the report
