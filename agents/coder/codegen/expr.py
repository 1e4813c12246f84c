"""The op-expression compiler shared by elementwise kernels, reduction prologues and epilogues:
a list of `ElementwiseOp`s becomes straight-line CUDA statements on fp32 registers, wrapped in a
`__device__ __forceinline__` function so every kernel variant (vector, scalar, tail) calls the
same code.  Math follows PyTorch's formulas (helpers `ks_*` live in the CUDA prelude).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    ATTR_OPS,
    BINARY_OPS,
    UNARY_OPS,
    ElementwiseOp,
    Operand,
)

# CUDA expressions of the ops, from their arguments' expressions.
_UNARY: dict[str, Callable[[str], str]] = {
    "neg": lambda a: f"(-{a})",
    "abs": lambda a: f"fabsf({a})",
    "relu": lambda a: f"ks_relu({a})",
    "sigmoid": lambda a: f"ks_sigmoid({a})",
    "tanh": lambda a: f"tanhf({a})",
    "exp": lambda a: f"ks_exp({a})",
    "log": lambda a: f"ks_log({a})",
    "sqrt": lambda a: f"sqrtf({a})",
    "rsqrt": lambda a: f"rsqrtf({a})",  # as PyTorch's CUDA kernel
    "reciprocal": lambda a: f"(1.0f / ({a}))",
    "gelu": lambda a: f"ks_gelu({a})",
    "gelu_tanh": lambda a: f"ks_gelu_tanh({a})",
    "silu": lambda a: f"ks_silu({a})",
    "softplus": lambda a: f"ks_softplus({a})",
    "mish": lambda a: f"ks_mish({a})",
    "elu": lambda a: f"ks_elu({a})",
    "selu": lambda a: f"ks_selu({a})",
    "hardswish": lambda a: f"ks_hardswish({a})",
    "hardsigmoid": lambda a: f"ks_hardsigmoid({a})",
    "square": lambda a: f"(({a}) * ({a}))",
}
_BINARY: dict[str, Callable[[str, str], str]] = {
    "add": lambda a, b: f"(({a}) + ({b}))",
    "sub": lambda a, b: f"(({a}) - ({b}))",
    "mul": lambda a, b: f"(({a}) * ({b}))",
    "div": lambda a, b: f"(({a}) / ({b}))",
    "maximum": lambda a, b: f"ks_max({a}, {b})",
    "minimum": lambda a, b: f"ks_min({a}, {b})",
    "pow": lambda a, b: f"powf({a}, {b})",
    "xlogy": lambda a, b: f"ks_xlogy({a}, {b})",
}
assert set(_UNARY) == set(UNARY_OPS) and set(_BINARY) == set(BINARY_OPS)


def c_float(x: float) -> str:
    """A Python float as an exact-enough CUDA fp32 literal (inf/nan spelled out)."""
    x = float(x)
    if math.isnan(x):
        return "KS_NAN"
    if math.isinf(x):
        return "KS_INF" if x > 0 else "(-KS_INF)"
    text = repr(x)
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f"


def op_expression(op: ElementwiseOp, args: list[str]) -> str:
    """The CUDA expression of one op, given its arguments already as CUDA expressions."""
    name = op.op
    if name in _UNARY:
        _arity(op, 1)
        return _UNARY[name](*args)
    if name in _BINARY:
        _arity(op, 2)
        divisor = op.args[1]
        if name == "div" and isinstance(divisor, (int, float)) and not isinstance(divisor, bool) \
                and divisor != 0 and math.isfinite(divisor):
            # x / c as x * (1/c): within an ulp (exact for powers of two), and inline, where IEEE
            # `/` calls a slow-path subroutine that makes ptxas spill register-cached rows.
            return f"(({args[0]}) * {c_float(1.0 / divisor)})"
        return _BINARY[name](*args)
    if name == "clamp":
        _arity(op, 1)
        lo, hi = op.attr("min"), op.attr("max")
        return f"ks_clamp({args[0]}, {c_float(-math.inf if lo is None else lo)}, {c_float(math.inf if hi is None else hi)})"
    if name == "leaky_relu":
        _arity(op, 1)
        slope = op.attr("negative_slope")
        return f"ks_leaky_relu({args[0]}, {c_float(0.01 if slope is None else slope)})"
    if name == "where":
        _arity(op, 3)
        return f"((({args[0]}) != 0.0f) ? ({args[1]}) : ({args[2]}))"
    known = sorted(UNARY_OPS | BINARY_OPS | ATTR_OPS)
    raise ValueError(f"unsupported elementwise op {name!r}; known: {known}")


def _arity(op: ElementwiseOp, n: int) -> None:
    if len(op.args) != n:
        raise ValueError(f"op {op.op!r} takes {n} argument(s), got {len(op.args)}: {op}")


@dataclass(frozen=True)
class DeviceFunction:
    """A compiled op list: `source` defines `name(float in..., float& out...)`."""

    name: str
    source: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def compile_ops(
    name: str, inputs: tuple[str, ...], ops: tuple[ElementwiseOp, ...], outputs: tuple[str, ...]
) -> DeviceFunction:
    """`__device__ __forceinline__ void name(float i0, ..., float& o0, ...)` computing `outputs`
    from `inputs` through `ops` (each op defines a fresh register, so redefinitions are safe)."""
    env: dict[str, str] = {}
    params = []
    for k, value in enumerate(inputs):
        env[value] = f"in{k}"
        params.append(f"const float in{k}")
    lines = []
    softplus_of: dict[str, str] = {}  # a softplus result's register -> its argument's
    for k, op in enumerate(ops):
        args = [_operand(a, env, op) for a in op.args]
        if op.op == "tanh" and args[0] in softplus_of:
            # tanh(softplus(x)) as one expression (mish written out, level2/52's
            # tanh(softplus(x)) * x): the softplus register is then dead unless read elsewhere
            expression = f"ks_tanh_softplus({softplus_of[args[0]]})"
        else:
            expression = op_expression(op, args)
        lines.append(f"  const float t{k} = {expression};")
        if op.op == "softplus":
            softplus_of[f"t{k}"] = args[0]
        env[op.out] = f"t{k}"
    for k, value in enumerate(outputs):
        if value not in env:
            raise ValueError(f"{name}: output {value!r} is neither an input nor computed by an op")
        params.append(f"float& out{k}")
        lines.append(f"  out{k} = {env[value]};")
    body = "\n".join(lines)
    source = render("device_function.cu", name=name, params=", ".join(params), body=body)
    return DeviceFunction(name=name, source=source, inputs=tuple(inputs), outputs=tuple(outputs))


def _operand(arg: Operand, env: dict[str, str], op: ElementwiseOp) -> str:
    if isinstance(arg, (int, float)) and not isinstance(arg, bool):
        return c_float(arg)
    if isinstance(arg, str) and arg in env:
        return env[arg]
    raise ValueError(f"op {op.op!r} reads {arg!r}, which is not defined before it")


def used_values(ops: tuple[ElementwiseOp, ...]) -> set[str]:
    """Names the ops read (tensor inputs or earlier results)."""
    return {a for op in ops for a in op.args if isinstance(a, str)}
