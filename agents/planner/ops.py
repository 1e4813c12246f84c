"""What each ATen op is to the scheduler: an elementwise op (translated to codegen ops), a
reduction, a GEMM, a library call, a view the wrapper does in PyTorch, or a fallback.
Torch-free: works on graph nodes by op name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from kernelstitch.agents.plan.graph import Graph, Node, NodeRef
from kernelstitch.agents.plan.kernel_spec import ElementwiseOp
from kernelstitch.agents.plan.library_ops import CONV_OPS

FLOAT_DTYPES = frozenset({"float32", "float16", "bfloat16"})
ELEMENT_SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
                "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8}

NodeClass = Literal["host", "elementwise", "reduction", "pool", "batch_stats", "gemm", "library", "fallback"]

REDUCTION_KINDS = {
    "aten.sum.dim_IntList": "sum", "aten.mean.dim": "mean", "aten.amax.default": "amax",
    "aten.amin.default": "amin", "aten.logsumexp.default": "logsumexp",
    "aten.softmax.int": "softmax", "aten._softmax.default": "softmax",
    "aten.log_softmax.int": "log_softmax", "aten._log_softmax.default": "log_softmax",
    "aten.layer_norm.default": "layer_norm",
    # instance_norm with batch statistics is group_norm with one channel per group
    "aten.group_norm.default": "group_norm", "aten.instance_norm.default": "group_norm",
}
# Where a normalisation keeps its affine weight / bias and eps among its arguments.
_NORM_ARGS = {  # op -> ((weight index, key), (bias index, key), (eps index, key))
    "aten.layer_norm.default": ((2, "weight"), (3, "bias"), (4, "eps")),
    "aten.group_norm.default": ((2, "weight"), (3, "bias"), (4, "eps")),
    "aten.instance_norm.default": ((1, "weight"), (2, "bias"), (7, "eps")),
}
CAT_OP = "aten.cat.default"  # planned as a concatenation kernel (codegen/cat.py)

# Cumulative scans the scan kernels compute (op -> kind), with an elementwise prologue, and the
# synthetic scans the rewrites make of them (aten op -> synthetic op): rewrites._reverse_scan's
# x.flip(d).cumsum(d).flip(d) in one pass, rewrites._exclusive_scan's cat((zeros,
# x[:-1].cumsum(d)), d) in one pass.
_ATEN_SCANS = {"aten.cumsum.default": "sum", "aten.cumprod.default": "prod"}
REVERSE_SCAN_OPS = {"aten.cumsum.default": "kernelstitch.cumsum_reverse",
                    "aten.cumprod.default": "kernelstitch.cumprod_reverse"}
EXCLUSIVE_SCAN_OPS = {"aten.cumsum.default": "kernelstitch.cumsum_exclusive",
                      "aten.cumprod.default": "kernelstitch.cumprod_exclusive"}
SCAN_IDENTITY = {"sum": 0.0, "prod": 1.0}  # an exclusive scan's first value
SCAN_KINDS = {**_ATEN_SCANS, **{REVERSE_SCAN_OPS[a]: k for a, k in _ATEN_SCANS.items()},
              **{EXCLUSIVE_SCAN_OPS[a]: k for a, k in _ATEN_SCANS.items()}}
REVERSE_SCANS = frozenset(REVERSE_SCAN_OPS.values())
EXCLUSIVE_SCANS = frozenset(EXCLUSIVE_SCAN_OPS.values())
# Fills whose value is fixed by the op (full / full_like carry theirs as an argument).
FILL_VALUES = {"aten.zeros_like.default": 0.0, "aten.ones_like.default": 1.0,
               "aten.zeros.default": 0.0, "aten.ones.default": 1.0}
# argmax / argmin (int64 indices) as the arg-reduce kernels (codegen/arg_reduce.py), with a prologue.
ARG_REDUCE_KINDS = {"aten.argmax.default": "argmax", "aten.argmin.default": "argmin"}
# triu / tril (a diagonal) as the triangle kernel (codegen/triangle.py), with a prologue.
TRIANGLE_KINDS = {"aten.triu.default": "triu", "aten.tril.default": "tril"}
# masked_fill(x, m == 0, v) read as one elementwise select on m itself (rewrites._masked_fill_eq):
# (cond, a, b) -> a where cond != 0 else b, cond a float or bool tensor, a / b tensors or numbers.
WHERE_NONZERO_OP = "kernelstitch.where_nonzero"
# cross_entropy's negative log-likelihood from the rows' logsumexp (rewrites._cross_entropy):
# (logits [N, C], int64 targets [N], lse [N]), kwargs reduction ("none" | "mean" | "sum"), ignore_index.
NLL_OP = "kernelstitch.nll_loss"
# A 2-D convolution's input summed per tap over the input positions that tap carries into the
# output, divided by the output's spatial size (rewrites._conv_spatial_mean): (x [N, C, H, W],)
# with kwargs kernel (kh, kw), stride, padding, dilation (pairs), output_padding (pair, transposed
# only), transposed (bool); the result is [C, N, kh * kw] (codegen/conv_taps.py).
CONV_TAP_MEANS_OP = "kernelstitch.conv_tap_means"
# Pooling over 1-3 trailing spatial dims: op -> (PoolSpec kind, spatial dims).
POOL_OPS: dict[str, tuple[str, int]] = {
    **{f"aten.max_pool{d}d.default": ("max", d) for d in (1, 2, 3)},
    **{f"aten.avg_pool{d}d.default": ("avg", d) for d in (1, 2, 3)},
    **{f"aten.adaptive_avg_pool{d}d.default": ("adaptive_avg", d) for d in (1, 2, 3)},
}
# Training-mode batch_norm's statistics (a planner rewrite's node, computed by a kernel of ours):
# (x, running_mean | None, running_var | None) -> fp32 [2, C] (mean, rstd), kwargs eps, momentum.
BATCH_STATS_OP = "kernelstitch.batch_norm_stats"
# Training-mode batch_norm's statistics over a concatenation along the channels, from each
# concatenated tensor's own statistics (rewrites._batch_stats_of_cat): ([parts: BATCH_STATS_OP
# results of the same eps, without running statistics], sizes, running_mean | None,
# running_var | None) -> fp32 [2, C] (mean, rstd), kwargs eps, momentum; `sizes` (the
# concatenation, which the normalisation reads anyway) gives the count of values a channel for
# the unbiased running variance.
BATCH_STATS_MERGE_OP = "kernelstitch.batch_norm_stats_merge"
# Ops whose first argument a kernel of ours reads through an elementwise prologue.
PROLOGUE_ANCHORS = (frozenset(REDUCTION_KINDS) | frozenset(POOL_OPS) | frozenset(ARG_REDUCE_KINDS)
                    | frozenset(TRIANGLE_KINDS) | {BATCH_STATS_OP})
GEMM_OPS = frozenset({"aten.linear.default", "aten.matmul.default", "aten.mm.default",
                      "aten.addmm.default"})

# PyTorch's fused attention: a library call (planner/attention.py reads written-out attention as it).
SDPA_OP = "aten.scaled_dot_product_attention.default"
# relu(q k^T * scale, masked to 0) v: attention with ReLU in place of softmax, which has no
# library form; made (with SDPA's argument layout) only where our attention kernel takes it.
RELU_ATTENTION_OP = "kernelstitch.relu_attention"

# The ATen ops torch.profiler shows for one PyTorch library call (the whole chain is declared).
LIBRARY_CHAINS: dict[str, tuple[str, ...]] = {
    "conv1d": ("aten::conv1d", "aten::convolution", "aten::_convolution",
               "aten::cudnn_convolution"),
    "conv2d": ("aten::conv2d", "aten::convolution", "aten::_convolution",
               "aten::cudnn_convolution"),
    "conv3d": ("aten::conv3d", "aten::convolution", "aten::_convolution",
               "aten::cudnn_convolution"),
    "convolution": ("aten::convolution", "aten::_convolution", "aten::cudnn_convolution",
                    "aten::cudnn_convolution_transpose"),
    **{f"conv_transpose{d}d": (f"aten::conv_transpose{d}d", "aten::convolution", "aten::_convolution",
                               "aten::cudnn_convolution_transpose") for d in (1, 2, 3)},
    "linear": ("aten::linear", "aten::addmm", "aten::matmul", "aten::mm", "aten::t"),
    "matmul": ("aten::matmul", "aten::mm", "aten::bmm", "aten::_unsafe_view"),
    "mm": ("aten::mm",),
    "addmm": ("aten::addmm",),
    "bmm": ("aten::bmm",),
    # PyTorch picks the backend by dtype, mask and device (the nested ops are excused with it)
    "scaled_dot_product_attention": (
        "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
        "aten::_flash_attention_forward", "aten::_scaled_dot_product_efficient_attention",
        "aten::_efficient_attention_forward", "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_attention_math"),
    # cuDNN's whole-sequence recurrent kernels (the ops nested in these are excused with them)
    **{rnn: (f"aten::{rnn}", "aten::_cudnn_rnn") for rnn in ("rnn_tanh", "rnn_relu", "gru", "lstm")},
}
# Recurrent layers, captured as one op each (planner/recurrent.py): library calls.
RECURRENT_LIBRARY_OPS = frozenset({"aten.rnn_tanh.input", "aten.rnn_relu.input", "aten.gru.input",
                                   "aten.lstm.input"})
# Ops the plan leaves to a PyTorch library call (cuDNN, cuBLAS, fused attention) whatever their
# operands; GEMMs are decided apart (a kernel of ours when its epilogue fits).
LIBRARY_OPS = CONV_OPS | RECURRENT_LIBRARY_OPS | {"aten.bmm.default", SDPA_OP}


def norm_affine(node: Node) -> tuple[Any, Any]:
    """A normalisation's (weight, bias) arguments (NodeRef, None or something else); (None, None)
    for other ops."""
    where = _NORM_ARGS.get(node.op)
    if where is None:
        return None, None
    (wk, wkey), (bk, bkey), _ = where
    return node.arg(wk, wkey), node.arg(bk, bkey)


def norm_eps(node: Node) -> float:
    where = _NORM_ARGS.get(node.op)
    return float(node.arg(where[2][0], where[2][1], 1e-5)) if where else 1e-5


def norm_groups(node: Node, channels: Any) -> Any:
    """group_norm's num_groups; instance_norm's is its channel count (one channel per group)."""
    if node.op == "aten.instance_norm.default":
        return channels
    return node.arg(1, "num_groups")


def reduced_dims(dims: Any, rank: int) -> tuple[int, int] | None:
    """(first dim, count) when `dims` (ints, any sign) are consecutive dims of a rank-`rank`
    tensor, which one [outer, R, inner] view reduces as one; None otherwise."""
    if not isinstance(dims, list) or not dims or not all(isinstance(d, int) for d in dims):
        return None
    if rank == 0:
        return (0, 1) if dims in ([0], [-1]) else None
    norm = sorted({d + rank if d < 0 else d for d in dims})
    if len(norm) != len(dims) or norm[0] < 0 or norm[-1] >= rank:
        return None
    if norm != list(range(norm[0], norm[0] + len(norm))):
        return None
    return norm[0], len(norm)


def per_dim(value: Any, nd: int, default: list[int]) -> list[int] | None:
    """A pooling or convolution argument (an int, or a list of 1 or nd ints; empty: `default`)
    as nd ints, or None."""
    if value is None or value == []:
        value = default
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return None
    if len(value) == 1:
        value = value * nd
    return list(value) if len(value) == nd else None


def pool_params(node: Node, rank: int) -> dict[str, Any] | str:
    """A pooling op's PoolSpec fields (kind, nd, kernel, stride, ...) from its arguments, or why
    the built-in kernel cannot compute it."""
    kind, nd = POOL_OPS[node.op]
    if rank not in (nd + 1, nd + 2):
        return f"{base_op(node.op)} of a {rank}-d tensor"
    if kind == "adaptive_avg":
        size = per_dim(node.arg(1, "output_size"), nd, [])
        if size is None or min(size) < 1:
            return "adaptive pooling to a size that is not a static list of ints"
        return {"kind": kind, "nd": nd, "output_size": tuple(size)}
    kernel = per_dim(node.arg(1, "kernel_size"), nd, [])
    if kernel is None:
        return "pooling window that is not a static list of ints"
    stride = per_dim(node.arg(2, "stride"), nd, kernel)
    padding = per_dim(node.arg(3, "padding", 0), nd, [0])
    if kind == "max":
        dilation = per_dim(node.arg(4, "dilation", 1), nd, [1])
        ceil_mode = node.arg(5, "ceil_mode", False)
        count_include_pad, divisor = True, 0
    else:
        dilation = [1] * nd
        ceil_mode = node.arg(4, "ceil_mode", False)
        count_include_pad = node.arg(5, "count_include_pad", True)
        divisor = node.arg(6, "divisor_override") if nd > 1 else None
    if stride is None or padding is None or dilation is None or not isinstance(ceil_mode, bool) \
            or not isinstance(count_include_pad, bool) or not (divisor is None or isinstance(divisor, int)):
        return "pooling parameters that are not static ints"
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or (divisor or 0) < 0:
        return "pooling parameters out of range"
    return {"kind": kind, "nd": nd, "kernel": tuple(kernel), "stride": tuple(stride),
            "padding": tuple(padding), "dilation": tuple(dilation), "ceil_mode": ceil_mode,
            "count_include_pad": count_include_pad, "divisor": divisor or 0}


def base_op(op: str) -> str:
    """`aten.conv2d.default` -> `conv2d`."""
    parts = op.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else parts[-1]


def torch_ops_for(op: str) -> tuple[str, ...]:
    """Profiler names to declare for a PyTorch call of `op`."""
    base = base_op(op)
    return LIBRARY_CHAINS.get(base, (f"aten::{base}",))


def float_tensors(graph: Graph, node: Node) -> bool:
    """Every tensor the node reads and writes is fp32/fp16/bf16."""
    metas = [graph.node(r).meta for r in node.refs()]
    metas += list(node.outputs)
    return all(m is not None and m.dtype in FLOAT_DTYPES for m in metas) and bool(node.outputs)


def masked_float_tensors(graph: Graph, node: Node) -> bool:
    """Floating-point outputs, and inputs that are floating point or bool (a mask, read as 0 / 1
    by the elementwise and scan kernels; the other kernels take float operands only)."""
    metas = [graph.node(r).meta for r in node.refs()]
    return (bool(node.outputs) and all(m is not None and m.dtype in FLOAT_DTYPES for m in node.outputs)
            and all(m is not None and (m.dtype in FLOAT_DTYPES or m.dtype == "bool") for m in metas))


def reads_bool(graph: Graph, nodes: list[str], inside: set[str]) -> bool:
    """Whether any of `nodes` reads a bool tensor from outside `inside`."""
    return any((graph.node(r).meta is not None and graph.node(r).meta.dtype == "bool")
               for n in nodes for r in graph.node(n).refs() if r not in inside)


# ---- elementwise translation -----------------------------------------------------------------

Operand = Callable[[Any], "str | float"]

_UNARY_SAME = {
    "neg", "abs", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "reciprocal",
    "silu", "mish", "selu", "hardswish", "hardsigmoid", "square",
}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "multiply": "mul", "div": "div",
           "maximum": "maximum", "minimum": "minimum"}


def _scalar(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _operand(value: Any) -> str | float | None:
    """A node ref (by name) or a Python number; None for anything else."""
    if isinstance(value, NodeRef):
        return value.node
    return _scalar(value)


def translate_elementwise(node: Node) -> list[ElementwiseOp] | None:
    """The codegen ops computing `node` (defining `node.name`), or None if not elementwise."""
    parts = node.op.split(".")
    out = node.name
    if node.op == WHERE_NONZERO_OP:
        args = [_operand(a) for a in node.args]
        if len(args) != 3 or None in args or not isinstance(node.args[0], NodeRef):
            return None
        return [ElementwiseOp("where", tuple(args), out)]
    if len(parts) != 3 or parts[0] != "aten":
        return None
    name, overload = parts[1], parts[2]

    def op(kind: str, *args: Any, attrs: dict[str, float | None] | None = None,
           dest: str | None = None) -> ElementwiseOp:
        return ElementwiseOp(kind, tuple(args), dest or out,
                             tuple(sorted((attrs or {}).items())))

    operands = [_operand(a) for a in node.args]
    if any(o is None for o in operands[:1]):
        return None
    a = operands[0]
    if name in ("zeros_like", "ones_like", "full_like") and overload == "default":
        # where(x, v, v) is v for every x, NaN included: x only gives the shape (a fill with
        # another dtype, layout or memory format is not translated)
        value = FILL_VALUES.get(node.op)
        if name == "full_like":
            value = _scalar(node.arg(1, "fill_value"))
        if value is None or not isinstance(node.args[0], NodeRef) or any(
                node.kwargs.get(k) is not None for k in ("dtype", "layout", "memory_format")):
            return None
        return [op("where", a, value, value)]
    if name == "masked_fill" and overload == "Scalar":
        # x where the (bool) mask is false, the number where it is true; the mask reads as 0 / 1
        mask, value = (operands[1], _scalar(node.arg(2, "value"))) if len(operands) > 2 else (None, None)
        if not isinstance(node.args[1], NodeRef) or value is None:
            return None
        return [op("where", mask, value, a)]
    if name in ("add", "sub") and overload in ("Tensor", "Scalar"):
        b = operands[1] if len(operands) > 1 else None
        alpha = _scalar(node.arg(2, "alpha", 1))
        if b is None or alpha is None:
            return None
        if alpha == 1.0:
            return [op(name, a, b)]
        return [op("mul", b, alpha, dest=f"{out}__alpha"), op(name, a, f"{out}__alpha")]
    if name == "rsub" and overload in ("Tensor", "Scalar"):
        b = operands[1] if len(operands) > 1 else None
        alpha = _scalar(node.arg(2, "alpha", 1))
        if b is None or alpha is None:
            return None
        if alpha == 1.0:
            return [op("sub", b, a)]
        return [op("mul", a, alpha, dest=f"{out}__alpha"), op("sub", b, f"{out}__alpha")]
    if name in ("min", "max") and overload == "other":  # torch.min(x, y): elementwise
        b = operands[1] if len(operands) > 1 else None
        return None if b is None else [op("minimum" if name == "min" else "maximum", a, b)]
    if name in ("mul", "multiply", "maximum", "minimum") and overload in ("Tensor", "Scalar", "default"):
        b = operands[1] if len(operands) > 1 else None
        return None if b is None else [op(_BINARY[name], a, b)]
    if name == "xlogy" and overload in ("Tensor", "Scalar_Other"):
        b = operands[1] if len(operands) > 1 else None
        return None if b is None else [op("xlogy", a, b)]
    if name == "div" and overload in ("Tensor", "Scalar"):
        b = operands[1] if len(operands) > 1 else None
        return None if b is None else [op("div", a, b)]
    if name in _UNARY_SAME and overload == "default" and len(node.args) == 1:
        return [op(name, a)]
    if name == "gelu" and overload == "default":
        approximate = node.arg(1, "approximate", "none")
        return [op("gelu_tanh" if approximate == "tanh" else "gelu", a)]
    if name == "softplus" and overload == "default":
        if _scalar(node.arg(1, "beta", 1)) == 1.0 and _scalar(node.arg(2, "threshold", 20)) == 20.0:
            return [op("softplus", a)]
        return None
    if name == "elu" and overload == "default":
        defaults = [_scalar(node.arg(k, key, 1)) for k, key in
                    ((1, "alpha"), (2, "scale"), (3, "input_scale"))]
        return [op("elu", a)] if defaults == [1.0, 1.0, 1.0] else None
    if name == "clamp" and overload == "default":
        lo, hi = node.arg(1, "min"), node.arg(2, "max")
        if (lo is not None and _scalar(lo) is None) or (hi is not None and _scalar(hi) is None):
            return None
        return [op("clamp", a, attrs={"min": _scalar(lo) if lo is not None else None,
                                      "max": _scalar(hi) if hi is not None else None})]
    if name in ("clamp_min", "clamp_max") and overload == "default":
        bound = _scalar(node.arg(1, "min" if name == "clamp_min" else "max"))
        if bound is None:
            return None
        key = "min" if name == "clamp_min" else "max"
        return [op("clamp", a, attrs={"min": None, "max": None, key: bound})]
    if name == "hardtanh" and overload == "default":
        lo, hi = _scalar(node.arg(1, "min_val", -1.0)), _scalar(node.arg(2, "max_val", 1.0))
        return None if lo is None or hi is None else [op("clamp", a, attrs={"min": lo, "max": hi})]
    if name == "relu6" and overload == "default":
        return [op("clamp", a, attrs={"min": 0.0, "max": 6.0})]
    if name == "leaky_relu" and overload == "default":
        slope = _scalar(node.arg(1, "negative_slope", 0.01))
        return None if slope is None else [op("leaky_relu", a, attrs={"negative_slope": slope})]
    if name == "pow" and overload == "Tensor_Scalar":
        e = _scalar(node.args[1]) if len(node.args) > 1 else None
        if e is None:
            return None
        if e == 2.0:
            return [op("square", a)]
        if e == 1.0:
            return [op("mul", a, 1.0)]
        if e == 0.5:
            return [op("sqrt", a)]
        return [op("pow", a, e)]
    if name == "pow" and overload in ("Tensor_Tensor", "Scalar"):
        b = operands[1] if len(operands) > 1 else None
        return None if b is None else [op("pow", a, b)]
    return None


def elementwise_flops(ops: list[ElementwiseOp]) -> int:
    """Rough FLOPs per element (transcendentals count a few)."""
    heavy = {"gelu": 8, "gelu_tanh": 10, "sigmoid": 4, "tanh": 6, "silu": 5, "exp": 4, "log": 4,
             "softplus": 6, "mish": 12, "elu": 5, "selu": 6, "pow": 8, "sqrt": 2, "rsqrt": 2,
             "xlogy": 4}
    return sum(heavy.get(o.op, 1) for o in ops)


def inplace_base(op: str) -> str | None:
    """`aten.relu_.default` -> `aten.relu.default`; None for an op that is not in-place."""
    parts = op.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return None
    name = parts[1]
    if not name.endswith("_") or name.startswith("_") or name.endswith("__"):
        return None
    return f"aten.{name[:-1]}.{parts[2]}"


def mutates(graph: Graph) -> bool:
    """Whether any op writes into an existing tensor (in place, or an `.out` overload): rules that
    move a read to another point of the program must not run then."""
    return any(inplace_base(n.op) is not None or n.op.endswith(".out") for n in graph.nodes)
