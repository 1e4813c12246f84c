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
    # How the step's inputs map onto the call: consecutive groups of (count, as a Python list);
    # empty: every input a positional argument.  A recurrent call is (input, [h0, c0], [weights]).
    arg_groups: tuple[tuple[int, bool], ...] = ()

    def call_arguments(self, values: list[str]) -> str:
        """The call's argument text from the inputs' expressions, grouped per `arg_groups`."""
        if not self.arg_groups:
            return ", ".join(values)
        if sum(n for n, _ in self.arg_groups) != len(values):
            raise ValueError(f"{self.function}: {len(values)} inputs for argument groups {self.arg_groups}")
        parts, at = [], 0
        for count, as_list in self.arg_groups:
            group = values[at:at + count]
            parts.append("[" + ", ".join(group) + "]" if as_list else ", ".join(group))
            at += count
        return ", ".join(p for p in parts if p)
