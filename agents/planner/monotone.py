"""An exact rewrite of max pooling: the prologue's monotone tail applied once per output.

Proof obligation.  For every window holding at least one value (always, without dilation: torch
keeps padding <= kernel / 2 and starts every window inside the input), max_i f(x_i) = f(max_i
x_i) when f is non-decreasing and maps no non-NaN value to NaN (scalar operands checked as the
kernel's fp32 literals hold them: a factor that rounds to 0 would make inf * 0 = NaN): the
largest x_i gives the largest f(x_i), and a NaN tap makes both sides NaN (max pooling propagates
NaN, f(NaN) is NaN) while no other tap can become one.  So the ops the pooled value passes
through last, while each is such an f of that value, move from the prologue (once per tap) to
the epilogue (once per output): level2/82's tanh, x 2.0 and + bias run
once per 4 x 4 window instead of 16 times.  The equality is exact for a correctly rounded f (IEEE
rounding is monotone); the fast approximations some ops use (ks_sigmoid's __expf) are monotone to
within their few-ulp error, inside the fp32 tolerance.  Operands other than the pooled value must
be finite: scalars (checked here), or per-channel tensors constant over a window (model
parameters; a +-inf bias would make inf - inf in one order only).

Such an f, of the value v and operands c (a finite scalar or a per-channel tensor):
relu, sigmoid, tanh, exp, softplus, elu, selu; clamp (any bounds) and leaky_relu with
a slope > 0; v + c, c + v, v - c, maximum / minimum(v, c); v * s, s * v and v / s for a scalar
s > 0 (a per-channel factor's sign is unknown).  Not: gelu, silu, mish, hardswish (they dip),
log / sqrt / rsqrt (NaN below 0), neg, abs, square, reciprocal, and hardsigmoid (monotone, but
ks_hardsigmoid's fminf / fmaxf turn a NaN into 0, so a NaN tap would not survive the max).

Moving is not always cheaper: a per-channel operand read by a moved op is then read at every
output through its descriptor (a division and a modulo, ~15 instructions), where the prologue
read it once per channel, and the channels-last pools are instruction-bound (ncu, H100,
bench/results/2026-12-06-h100-s24).  So of the monotone tail's suffixes the one that saves the
most wins: (taps - 1) x its ops' cost (planner.ops.elementwise_flops) less EPILOGUE_READ_COST a
moved per-channel operand, and nothing moves unless that is positive (a 2 x 2 pool's relu(x + b)
moves the relu and keeps the bias add).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

from kernelstitch.agents.plan.kernel_spec import ElementwiseOp
from kernelstitch.agents.planner.ops import elementwise_flops

_UNARY = frozenset({"relu", "sigmoid", "tanh", "exp", "softplus", "elu", "selu"})
_SHIFTS = frozenset({"add", "maximum", "minimum"})  # either operand order
EPILOGUE_READ_COST = 16  # a per-channel operand read at each output: its descriptor offset and load


@dataclass(frozen=True)
class HoistedPool:
    """A max pooling's fused ops after the rewrite (the PoolSpec fields they fill)."""

    prologue: tuple[ElementwiseOp, ...]
    prologue_out: str  # "" where no prologue remains: the windows read the input itself
    epilogue: tuple[ElementwiseOp, ...]
    epilogue_out: str
    plane_inputs: tuple[str, ...]
    epilogue_inputs: tuple[str, ...]
    moved: tuple[str, ...]  # the moved ops, in order (for the plan's description)


def _as_float32(value: float) -> float | None:
    """`value` as the kernel's fp32 literal holds it, or None where that is not finite."""
    try:
        rounded = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return None
    return rounded if math.isfinite(rounded) else None


def _positive_factor(value, divisor: bool = False) -> bool:
    """A scalar factor > 0 in fp32 (a divisor's reciprocal too: `v / s` may be emitted as v * (1/s)):
    0 would make inf * 0 = NaN from an infinite tap."""
    if isinstance(value, str):
        return False
    f = _as_float32(value)
    return f is not None and f > 0 and (not divisor or (_as_float32(1.0 / value) or 0.0) > 0)


def _chain_arg(op: ElementwiseOp, planes: set[str]) -> str | None:
    """The operand `op` is monotone in (non-decreasing, no new NaN), or None."""
    tensors = [a for a in op.args if isinstance(a, str)]
    scalars = [a for a in op.args if not isinstance(a, str)]
    if any(_as_float32(s) is None for s in scalars):
        return None
    if op.op in _UNARY and len(op.args) == 1 and tensors:
        return tensors[0]
    if op.op == "clamp" and len(op.args) == 1 and tensors:
        return tensors[0]
    slope = op.attr("negative_slope")
    if op.op == "leaky_relu" and len(op.args) == 1 and tensors and _positive_factor(0.01 if slope is None else slope):
        return tensors[0]  # slope 0 would make -inf * 0 = NaN
    if len(op.args) != 2:
        return None
    a, b = op.args
    if op.op in _SHIFTS or op.op == "sub":
        # the other operand a finite scalar or a per-channel tensor (sub: only as the subtrahend)
        other_ok = lambda x: not isinstance(x, str) or x in planes  # noqa: E731
        if isinstance(a, str) and a not in planes and other_ok(b):
            return a
        if op.op != "sub" and isinstance(b, str) and b not in planes and other_ok(a):
            return b
        return None
    if op.op == "mul":
        if isinstance(a, str) and _positive_factor(b):
            return a
        if isinstance(b, str) and _positive_factor(a):
            return b
        return None
    if op.op == "div" and isinstance(a, str) and _positive_factor(b, divisor=True):
        return a
    return None


def hoist_monotone_tail(prologue: tuple[ElementwiseOp, ...], prologue_out: str,
                        epilogue: tuple[ElementwiseOp, ...], epilogue_out: str,
                        plane_inputs: tuple[str, ...], epilogue_inputs: tuple[str, ...],
                        taps: int, dilation_over_one: bool = False) -> HoistedPool | None:
    """The max pooling's fused ops with a monotone tail of the prologue moved to the epilogue (see
    the module's proof obligation and cost rule; `taps`: the values a window pools), or None where
    nothing moves.  A dilated window (`dilation_over_one`) can hold no input value at all, and its
    max is then -inf, which f would change (relu(-inf) = 0): nothing moves there.  `epilogue`
    reads the pooled value as "acc"; plane inputs read only by moved ops become epilogue inputs
    (read at the output)."""
    if not prologue or not prologue_out or dilation_over_one:
        return None
    producers = {op.out: op for op in prologue}
    planes = set(plane_inputs)
    chain: list[tuple[ElementwiseOp, str]] = []  # (op, the value it is monotone in), last op first
    current = prologue_out
    while current in producers:
        op = producers[current]
        arg = _chain_arg(op, planes)
        if arg is None or sum(1 for a in op.args if a == arg) != 1:
            break
        chain.append((op, arg))
        current = arg
    best, best_saving = None, 0
    for length in range(1, len(chain) + 1):  # the last `length` ops of the prologue
        moved = [op for op, _ in reversed(chain[:length])]
        moved_outs = {op.out for op in moved}
        kept = tuple(op for op in prologue if op.out not in moved_outs)
        kept_reads = {a for op in kept for a in op.args if isinstance(a, str)}
        moved_planes = {a for op in moved for a in op.args if isinstance(a, str) and a in planes}
        if kept_reads & moved_outs or moved_planes & kept_reads:
            continue  # a kept op reads a moved value, or an operand both kinds of field would need
        saving = (taps - 1) * elementwise_flops(moved) - EPILOGUE_READ_COST * len(moved_planes)
        if saving > best_saving:
            best, best_saving = (moved, kept, chain[length - 1][1], moved_planes), saving
    if best is None:
        return None
    moved, kept, pooled, moved_planes = best
    first = replace(moved[0], args=tuple("acc" if a == pooled else a for a in moved[0].args))
    last = moved[-1].out
    after = tuple(replace(op, args=tuple(last if a == "acc" else a for a in op.args)) for op in epilogue)
    return HoistedPool(
        prologue=kept,
        prologue_out=pooled if kept else "",
        epilogue=(first, *moved[1:], *after),
        epilogue_out=last if epilogue_out == "acc" else epilogue_out,
        plane_inputs=tuple(p for p in plane_inputs if p not in moved_planes),
        epilogue_inputs=tuple(epilogue_inputs) + tuple(sorted(moved_planes - set(epilogue_inputs))),
        moved=tuple(op.op for op in moved),
    )
