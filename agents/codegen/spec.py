"""Kernel specifications: the contract between the scheduler (what to fuse) and the kernel
emitters (CUDA source for one fused step).

A spec says *what* a kernel computes, never for which shape: every emitted kernel takes its sizes
at run time, so one compiled candidate serves every valid input shape.  All arithmetic happens in
fp32 registers whatever the storage dtype (fp32, fp16, bf16).

Values inside a kernel are named strings.  Tensor inputs are named by `TensorArg.name`; each
`ElementwiseOp` defines `out`; constants are Python floats written into the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

DType = Literal["float32", "float16", "bfloat16"]

# Unary ops: one value argument.  Binary ops: two (value or float constant).
UNARY_OPS = frozenset(
    {
        "neg", "abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal",
        "gelu",  # exact (erf) GELU, torch's default
        "gelu_tanh",  # GELU(approximate='tanh')
        "silu", "softplus", "mish", "elu", "selu", "hardswish", "hardsigmoid", "square",
    }
)
BINARY_OPS = frozenset({"add", "sub", "mul", "div", "maximum", "minimum", "pow"})
# Ops with float attributes in `attrs`:
#   clamp(x) attrs {"min": float|None, "max": float|None}  (also hardtanh, relu6)
#   leaky_relu(x) attrs {"negative_slope": float}
#   where(cond, a, b): three values; cond is compared `!= 0`
ATTR_OPS = frozenset({"clamp", "leaky_relu", "where"})

Operand = str | float


@dataclass(frozen=True)
class TensorArg:
    """A tensor the kernel reads.  At run time it is broadcast (torch rules) to the shape the
    kernel iterates over; the binding passes 0 strides for broadcast dimensions."""

    name: str
    dtype: DType


@dataclass(frozen=True)
class ElementwiseOp:
    op: str
    args: tuple[Operand, ...]
    out: str
    attrs: tuple[tuple[str, float | None], ...] = ()  # sorted (key, value) pairs: hashable

    def attr(self, key: str) -> float | None:
        return dict(self.attrs).get(key)


@dataclass(frozen=True)
class ElementwiseSpec:
    """out_k = f_k(inputs...) for every element of the broadcast shape of the inputs, in one pass.

    `outputs` names the values stored (usually one; several when later steps need intermediates).
    The binding returns one tensor per output, contiguous, of dtype `out_dtype`.
    """

    name: str
    inputs: tuple[TensorArg, ...]
    ops: tuple[ElementwiseOp, ...]
    outputs: tuple[str, ...]
    out_dtype: DType


ReductionKind = Literal[
    "sum", "mean", "amax", "amin", "logsumexp",  # produce the reduced shape
    "softmax", "log_softmax", "layer_norm",  # produce the input's shape
]


@dataclass(frozen=True)
class ReductionSpec:
    """A reduction over one dimension of a tensor seen as [outer, R, inner] (R the reduced
    dimension; `inner == 1` is the common, contiguous last-dim case), with fused elementwise
    prologue and epilogue.

    * `prologue` computes the reduced operand `prologue_out` from `inputs` (all broadcast to the
      shape of `inputs[0]`); empty prologue means `prologue_out == inputs[0].name`.
    * `kind` reduces it along `dim` (normalised at run time; keepdim as given).
    * layer_norm normalises over the trailing `norm_ndim` dimensions (treated as R) with `eps`;
      `weight`/`bias` name TensorArgs in `inputs` (or None).
    * `epilogue` maps the reduction's result, named `"acc"`, elementwise to the stored output
      `epilogue_out`; epilogue tensor inputs (in `inputs` too) broadcast to the output shape.
    """

    name: str
    kind: ReductionKind
    inputs: tuple[TensorArg, ...]
    dim: int
    keepdim: bool
    out_dtype: DType
    prologue: tuple[ElementwiseOp, ...] = ()
    prologue_out: str = ""
    epilogue: tuple[ElementwiseOp, ...] = ()
    epilogue_out: str = "acc"
    epilogue_inputs: tuple[str, ...] = ()  # names in `inputs` used only by the epilogue
    norm_ndim: int = 1
    eps: float = 1e-5
    weight: str | None = None
    bias: str | None = None


Activation = Literal["none", "relu", "gelu", "gelu_tanh"]


@dataclass(frozen=True)
class GemmSpec:
    """y = act(x @ W^T + bias) [* alpha]: a Linear/matmul through cuBLASLt with its epilogue
    fused (bias, relu, gelu), x of shape [..., K], W [N, K] (Linear layout, `weight_layout="nk"`) or
    [K, N] (matmul layout, `"kn"`)."""

    name: str
    x: TensorArg
    weight: TensorArg
    bias: TensorArg | None
    activation: Activation
    out_dtype: DType
    weight_layout: Literal["nk", "kn"] = "nk"


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
