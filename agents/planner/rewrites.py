"""Exact graph rewrites applied before scheduling.  Each returns `GraphEdit`s (synthetic nodes
replacing or preceding captured ones); the plan records them so the coder sees the same graph.

* `linear_sum`: ``linear(x, W, b).sum(dim=-1)`` == ``(x * W.sum(0)).sum(-1) + b.sum()``.
  Summing the output features first turns an M x N x K GEMM into two reductions over the
  weights (N x K, once per call) and one fused multiply-reduce over x (M x K): exact in real
  arithmetic, only the fp32 summation order changes.
* `conv_spatial_mean`: ``conv2d(x, W, b).mean((2, 3))`` (a transposed conv too; scalar multiplies or
  divisions between them, groups 1, kernels up to 7 x 7) == ``sum_c(T[c] @ W'[c]) + b`` times the
  scalars, where ``T[c, n, (i, j)]`` is the mean over the output positions of the input value that
  kernel tap (i, j) multiplies there (0 where the tap falls on padding) and ``W'[c] = W[:, c]``'s
  taps by output channel (a view): the conv is linear, so its spatial mean is the taps' means
  through the weights. For each tap the input positions it carries into the output form a range
  per dim (strided for a strided conv), so one pass over x gives every tap's sum
  (`kernelstitch.conv_tap_means`, codegen/conv_taps.py), then a [C] batch of [N, kh*kw] x
  [kh*kw, C_out] products and a sum over C: the conv output (for level2/42, 1.07 GB of input into
  an output four times its size) is never computed. Exact in real arithmetic; only the fp32
  summation order changes.
* `conv_bias`: ``conv(x, W, b)`` == ``conv(x, W) + b.view(-1, 1, ...)``: the bias add moves out
  of cuDNN into the elementwise epilogue or reduction prologue kernel that follows the
  convolution anyway (one less pass over the output).  The planner keeps the bias in the library
  call (`keep_conv_bias`) where no kernel follows to absorb the add.
* `max_values`: ``torch.max(x, dim).values`` with the indices unused (nothing reads export's
  getitem of them) == ``amax(x, dim)``; ``torch.min`` likewise ``amin``.
* `batch_norm`: ``batch_norm(x, w, b, mean, var, training)`` == ``(x - m) * r * w + b`` with
  per-channel views of m and r: in eval mode the running mean and ``rsqrt(var + eps)``, in
  training mode row 0 and 1 of a statistics kernel's [2, C] result (batch mean, ``rsqrt(biased
  var + eps)``; the kernel updates the running statistics as torch does).  Elementwise, so the
  normalisation fuses with the conv's bias add before it and the activations after it; the
  statistics kernel recomputes the ops before it in its prologue (`recompute_prologue`).
* `global_avg_pool`: ``adaptive_avg_poolNd(x, 1)`` == ``x.mean(spatial dims, keepdim=True)``:
  one window covering every spatial position is the mean over them (torch's window bounds
  [0, in) for an output size of 1), and the reduction kernels read a long plane with every
  thread of a block instead of one thread per window.
* `inplace_ops`: ``y = x.relu_()`` (``add_``, ``mul_``, ``hardtanh_``, ``clamp_``, ...) ==
  ``y = x.relu()`` when x is a fresh value of this forward (no input, parameter, buffer,
  constant, view or alias of one) and nothing but the in-place op reads x: the old value is
  never observed, so overwriting it or writing a new tensor is the same program.  Only where the
  out-of-place form is a fused elementwise op with x's dtype (no type promotion to differ);
  other in-place ops stay PyTorch calls as written.
* `constant_operands`: an elementwise op reading a 0-d tensor constant (``torch.min(x,
  torch.tensor(0.5))``) reads the number instead, a constant of its fused kernel: a 0-d tensor
  takes part in type promotion like a Python scalar, so the result is the same.
* `clone_alias`: ``y = x.clone()`` (or ``x.detach()``, ``x.clone().detach()``) read by fused ops
  == reading x itself, when x is a fresh value of this forward (no input, parameter, buffer,
  constant or view of one), the graph holds no in-place op (nothing can write x or y after
  the copy, so the two hold equal values for their whole lives) and neither y nor x is an output
  (two outputs sharing memory would be observable).  The copy split KernelBench's
  ``original_x = x.clone().detach()`` chains into two kernels and a memcpy.
* `vector_norm`: ``torch.linalg.vector_norm(x, ord, dim, keepdim)`` (``torch.norm``,
  ``x.norm(p=2, dim=...)``) == ``sqrt(sum(x * x, dim))`` for ord 2, ``sum(abs(x), dim)`` for ord 1,
  ``amax(abs(x), dim)`` for ord inf: the definitions of those norms (torch computes them in the
  input's dtype without rescaling too), so the reduction kernels fuse the square / abs in their
  prologue and the square root in their epilogue, and what follows (``x / norm``) fuses too.
* `full_reduction`: ``x.mean()`` / ``x.sum()`` (no dim) == ``x.mean(all dims)``: the same
  reduction, in the form the reduction kernels take.
* `smooth_l1`: ``smooth_l1_loss(a, b, reduction, beta)`` (``HuberLoss`` with delta 1) ==
  ``m = min(|a - b|, beta); 0.5 * m * m / beta + (|a - b| - m)`` then the mean / sum / nothing:
  for ``|d| < beta`` that is ``0.5 d^2 / beta``, otherwise ``0.5 beta + |d| - beta``, torch's two
  branches without a comparison op (only the rounding of the second branch differs). The
  ``broadcast_tensors`` torch calls first is read through when both shapes already match.
* `triplet_margin`: ``triplet_margin_loss(a, pos, neg, margin, p=2, eps, swap=False)`` ==
  ``clamp(margin + ||a - pos + eps|| - ||a - neg + eps||, min=0)`` (norms over the last dim) then
  the mean / sum / nothing: ATen's definition through ``pairwise_distance``, so each distance is
  one fused row reduction (prologue sub, add, square; epilogue sqrt).
* `kl_div`: ``kl_div(input, target, reduction, log_target)`` == ``xlogy(target, target) - target *
  input`` (``exp(target) * (target - input)`` for log targets) then the mean / sum / nothing,
  ATen's definition.  ``F.kl_div(..., reduction="batchmean")`` is that sum divided by
  ``input.size(0)``: read as the mean over dim 0 of the sums over the other dims (the same sum,
  regrouped), so no division by a run-time size is left to PyTorch.
* `cross_entropy`: ``cross_entropy(x, t, reduction, ignore_index)`` for logits [N, C] and class
  indices [N] (no weight, no label smoothing) == ``lse_i - x[i, t_i]`` with ``lse = logsumexp(x,
  1)``, 0 where ``t_i == ignore_index``, then the mean over the rows that count / sum / nothing:
  ``log_softmax(x)[i, c] = x[i, c] - lse_i``, so torch's ``nll_loss(log_softmax(x), t)`` is that
  (the same rows ignored, the same divisor).  One row reduction and one pick per row
  (`kernelstitch.nll_loss`, codegen/nll.py): the [N, C] log-probabilities are never stored.
* `masked_fill_eq`: ``x.masked_fill(m == 0, v)`` == ``where(m != 0, x, v)`` and
  ``x.masked_fill(m != 0, v)`` == ``where(m != 0, v, x)`` (`kernelstitch.where_nonzero`, one
  elementwise select): the same test of each element of m against 0 (NaN != 0, as torch's
  ``eq`` is false for it), so the bool mask (GPT's ``self.bias[:, :, :T, :T] == 0``) is never
  built: it was a PyTorch kernel and a bool tensor the fused kernel would read.
* `exclusive_scan`: ``cat((zeros [.., 1, ..], cumsum(x.narrow(d, 0, n - 1), d)), d)`` (KernelBench's
  exclusive cumsum; ``ones`` and ``cumprod`` alike) == the exclusive scan of x along d: position
  0 holds the identity, position k > 0 the scan of x over 0..k-1, which is the inclusive scan of
  the first n - 1 values shifted by one (`kernelstitch.cumsum_exclusive`): one kernel reads x
  once and writes the output once, where the scan of the narrowed copy then the cat wrote it twice.
* `pool_before_pointwise_conv`: ``avg_pool(conv(z, W, b))`` for a 1x1 convolution (stride 1, no
  padding, no dilation, any groups) == ``conv(avg_pool(z), W, b)``: at each pixel the conv is the
  same linear map over channels, and an average pool is a weighted sum over pixels whose weights
  add up to 1, so the two commute (the bias survives the average).  Not where the average counts
  padded zeros (padding with count_include_pad, or a divisor_override) and the conv has a bias:
  there the conv-first zeros are 0, not b.  Adaptive average pooling alike.  DenseNet's
  transition (BN, ReLU, 1x1 conv, 2x2 average pool): the conv runs on a quarter of the pixels and
  the full-size conv output is never stored; applied only where the pool at least halves the
  pixels.
* `stacked_pools`: ``pool(pool(x, k1), k2)`` (two max or two average pools of the same
  dimension, each window its own stride, no padding, dilation or ceil mode, no divisor
  override) == ``pool(x, k1 * k2)``: output i of the second pool covers first-pool outputs
  i*k2 .. i*k2 + k2 - 1, which cover inputs i*k1*k2 .. (i + 1)*k1*k2 - 1, one window of the
  composed size and stride; the sizes agree (floor(floor(n / k1) / k2) == floor(n / (k1 * k2))),
  and a max of maxes is the max (the same value; of a +0 and a -0 tied, either sign), an
  average of equal-sized floating-point averages the average (the summation order and fp16 /
  bf16's intermediate rounding change; integer averages, which truncate after each pool, are
  left alone).  level2/6's two 2x2x2 max pools read the softmax once and never store the first
  pool's output.
* `einsum_matmul`: ``einsum("...c,cn->...n", a, b)`` (one contracted index, last of ``a`` and
  first of the 2-D ``b``; the output the free indices in order) == ``a @ b``: the definition of
  matmul with ``a``'s leading dims as batch, so it plans as a GEMM (torch's einsum runs the same
  bmm).
* einsum rules (`einsum_rewrites.py`, before `einsum_matmul`): a selection of an einsum's output
  taken through it, and zeros concatenated along a summed letter left out.
* `views_through_elementwise`: ``reduce(view(f(a, b)))`` == ``reduce(f(view(a), view'(b)))`` and
  ``g(view(reduce(..)), c)`` == ``view(g(reduce(..), view'(c)))`` for elementwise f, g and a
  reshape (view / reshape / flatten / unflatten of a contiguous value): an elementwise op maps
  each element alone, so it commutes with any renumbering of the elements, and a broadcast
  operand b (sizes 1 or equal to the full value's in each group of merged or split dims) is the
  same broadcast in the other shape (``view'``: its sizes regrouped, 1 where the group is 1).
  KernelBench's ``x.view(b, c, -1).softmax(-1).view(b, c, d, h, w) * scale`` (level2/38): the
  clamp before the view becomes the softmax's prologue and the scale its epilogue, one kernel
  where there were three.
* `attention` (agents/planner/attention.py): ``softmax(q @ k.transpose(-2, -1) * c [masked]) @ v``
  == ``scaled_dot_product_attention(q, k, v, attn_mask, scale=c)``, SDPA's definition; off in
  the planner's `attention-written-out` variant.
* `recompute_prologue`: when a reduction's input is an elementwise value that something else
  also reads (RMSNorm's ``h = x + r`` feeds both ``h.pow(2).mean()`` and ``h * rms``), the
  reduction gets its own copy of the elementwise chain (recomputed from the chain's inputs in
  its prologue) so the other reader can fuse with ``h`` instead of reading it back from memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from kernelstitch.agents.plan.graph import (
    Graph,
    GraphEdit,
    Node,
    NodeRef,
    TensorMeta,
    channel_view,
    renamed,
    scalar_constant,
    synthetic_fields,
)
from kernelstitch.agents.plan.host_ops import VIEW_OPS, is_host
from kernelstitch.agents.plan.kernel_spec import (
    BATCH_STATS_MERGE_MAX_PARTS,
    CONV_TAP_MEANS_MAX_TAPS,
)
from kernelstitch.agents.planner.attention import attention_rewrites
from kernelstitch.agents.planner.dim_groups import symbolic_groups
from kernelstitch.agents.planner.einsum_rewrites import select_through_einsum, zeros_in_contraction
from kernelstitch.agents.planner.fusion import broadcast, live_nodes, live_users
from kernelstitch.agents.planner.group_norm_stats import group_norm_as_stats
from kernelstitch.agents.planner.norm_of_normalized import norm_of_normalized
from kernelstitch.agents.planner.ops import (
    BATCH_STATS_MERGE_OP,
    BATCH_STATS_OP,
    CAT_OP,
    CONV_OPS,
    CONV_TAP_MEANS_OP,
    EXCLUSIVE_SCAN_OPS,
    FILL_VALUES,
    FLOAT_DTYPES,
    NLL_OP,
    POOL_OPS,
    PROLOGUE_ANCHORS,
    REDUCTION_KINDS,
    REVERSE_SCAN_OPS,
    SCAN_IDENTITY,
    SCAN_KINDS,
    WHERE_NONZERO_OP,
    float_tensors,
    inplace_base,
    mutates,
    per_dim,
    pool_params,
    translate_elementwise,
)

MAX_RECOMPUTED_NODES = 8
MAX_RECOMPUTED_LEAVES = 2


@dataclass
class RewriteResult:
    graph: Graph
    edits: list[GraphEdit] = field(default_factory=list)
    algebraic: set[str] = field(default_factory=set)  # node names from algebraic rewrites
    notes: list[str] = field(default_factory=list)


def apply_rewrites(graph: Graph, keep_conv_bias: frozenset[str] = frozenset(),
                   attention: bool = True, relu_attention: bool = True,
                   batch_norm: bool = True, group_norm_stats: bool = False) -> RewriteResult:
    """`keep_conv_bias`: convolutions (node names) whose bias stays in the library call;
    `attention`: written-out attention read as scaled_dot_product_attention (attention.py);
    `relu_attention`: its ReLU form read as one node for our attention kernel; `batch_norm`:
    batch_norm as statistics + elementwise (else PyTorch's own op, a measured variant);
    `group_norm_stats`: a group_norm only ever reduced as its groups' statistics + elementwise
    (group_norm_stats.py, a measured variant)."""
    result = RewriteResult(graph)
    sdpa = (partial(_attention, relu=relu_attention),) if attention else ()
    norms = (_batch_norm,) if batch_norm else ()
    # after _max_values: a group_norm's readers are recognised as reductions (torch.max(x, dim))
    group_stats = (group_norm_as_stats,) if group_norm_stats else ()
    # _global_avg_pool before _conv_spatial_mean (a global pooling of a conv is its mean), which
    # precedes _conv_bias (it takes the conv with its bias)
    for rule in (_inplace_ops, _clone_alias, _constant_operands, *sdpa, _linear_sum, _pool_before_pointwise_conv,
                 _stacked_pools, _global_avg_pool, _conv_spatial_mean, partial(_conv_bias, keep=keep_conv_bias), *norms,
                 _batch_stats_of_cat,
                 _max_values, *group_stats,
                 _vector_norm, norm_of_normalized, _broadcast_expands, _full_reduction, _smooth_l1, _triplet_margin, _kl_div, _cross_entropy, _masked_fill_eq,
                 select_through_einsum, zeros_in_contraction, _einsum_matmul,
                 _reverse_scan, _exclusive_scan, _views_through_elementwise, _views_between_elementwise,
                 _recompute_prologue):
        edits, algebraic, notes = rule(result.graph)
        if edits:
            result.graph = result.graph.with_edits(edits)
            result.edits += edits
            result.algebraic |= algebraic
            result.notes += notes
    return result


# ATen views that host_ops.VIEW_OPS does not list (their results alias their input too).
_OTHER_VIEWS = frozenset({
    "aten.as_strided.default", "aten.diagonal.default", "aten.unfold.default",
    "aten.view_as_real.default", "aten.view_as_complex.default", "aten.alias.default",
    "aten.split_with_sizes.default", "aten.unsafe_split.Tensor", "aten.t_.default",
})


def _attention(graph: Graph, relu: bool = True):
    edits, notes = attention_rewrites(graph, relu=relu)
    return edits, set(), notes


def _fresh_and_unread(graph: Graph, users: dict[str, list[str]], node: Node) -> bool:
    """`node` (in-place) overwrites a value computed in this forward that nobody else reads:
    walk back through earlier in-place ops on the same memory to the op that made it."""
    reader = node.name
    target = node.args[0] if node.args else None
    while True:
        if not isinstance(target, NodeRef) or users.get(target.node, []) != [reader]:
            return False
        made = graph.node(target.node)
        if (made.is_placeholder or made.op in VIEW_OPS or made.op in _OTHER_VIEWS
                or made.op == "getitem" or is_host(made)):
            return False
        if inplace_base(made.op) is None:
            return True
        reader, target = made.name, made.args[0] if made.args else None


def _inplace_ops(graph: Graph):
    users = graph.users()
    edits: list[GraphEdit] = []
    done: dict[str, int] = {}
    for node in graph.nodes:
        op = inplace_base(node.op)
        if op is None or node.meta is None or not _fresh_and_unread(graph, users, node):
            continue
        out = renamed(node, op=op, synthetic=True)
        dtypes = {graph.node(r).meta.dtype for r in out.refs() if graph.node(r).meta is not None
                  and graph.node(r).meta.rank > 0}
        if (translate_elementwise(out) is None or not float_tensors(graph, out)
                or dtypes - {node.meta.dtype}):
            continue
        edits.append(GraphEdit(out))
        done[node.op.split(".")[1]] = done.get(node.op.split(".")[1], 0) + 1
    notes = []
    if done:
        counts = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(done.items()))
        notes.append(f"{sum(done.values())} in-place op(s) planned out of place ({counts}): each "
                     "overwrites a value of this forward that nothing else reads")
    return edits, set(), notes


_COPY_OPS = frozenset({"aten.clone.default", "aten.detach.default", "aten.alias.default"})


def _clone_alias(graph: Graph):
    if mutates(graph):
        return [], set(), []
    outputs = set(graph.output_names())
    source: dict[str, str] = {}  # copy node -> the fresh value it copies
    for node in graph.nodes:
        if node.op not in _COPY_OPS or not node.args or not isinstance(node.args[0], NodeRef):
            continue
        if node.kwargs.get("memory_format") is not None or node.name in outputs:
            continue
        origin = source.get(node.args[0].node, node.args[0].node)  # through clone().detach()
        made = graph.node(origin)
        if made.is_placeholder or is_host(made) or made.op in _OTHER_VIEWS or origin in outputs:
            continue
        source[node.name] = origin
    if not source:
        return [], set(), []

    def swap(value):
        if isinstance(value, NodeRef):
            return NodeRef(source.get(value.node, value.node))
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(swap(v) for v in value)
        return value

    edits = [GraphEdit(renamed(node, args=tuple(swap(a) for a in node.args),
                               kwargs={k: swap(v) for k, v in node.kwargs.items()}, synthetic=True))
             for node in graph.nodes if node.name not in source and any(r in source for r in node.refs())]
    note = (f"{len(source)} copy op(s) (clone / detach) read as the value they copy: it is fresh, nothing "
            "writes either afterwards, and neither is an output")
    return edits, set(), [note] if edits else []


def _constant_operands(graph: Graph):
    edits: list[GraphEdit] = []
    notes: list[str] = []
    for node in graph.nodes:
        if node.is_placeholder or is_host(node):
            continue
        folded: dict[str, int | float | bool] = {}
        for ref in node.refs():
            value = scalar_constant(graph.node(ref))
            if value is not None:
                folded[ref] = value
        if not folded:
            continue

        def fold(value, folded=folded):
            if isinstance(value, NodeRef):
                return folded.get(value.node, value)
            if isinstance(value, list):
                return [fold(v) for v in value]
            return value

        out = renamed(node, args=tuple(fold(a) for a in node.args),
                      kwargs={k: fold(v) for k, v in node.kwargs.items()}, synthetic=True)
        # a kernel needs one tensor operand: an op on constants alone keeps reading them as tensors
        if not out.refs() or translate_elementwise(out) is None or not float_tensors(graph, out):
            continue
        edits.append(GraphEdit(out))
        for ref, value in folded.items():
            target = graph.node(ref).placeholder.target
            notes.append(f"line {node.line or '?'}: the tensor constant {target} ({value!r}) is a "
                         f"constant of the {node.op.split('.')[1]} kernel")
    return edits, set(), notes


def _single_user(graph: Graph, users: dict[str, list[str]], name: str) -> str | None:
    found = users.get(name, [])
    return found[0] if len(found) == 1 else None


def _linear_sum(graph: Graph):
    users = graph.users()
    edits: list[GraphEdit] = []
    algebraic: set[str] = set()
    notes: list[str] = []
    for node in graph.nodes:
        if node.op != "aten.sum.dim_IntList" or node.kwargs.get("dtype") is not None:
            continue
        src = node.args[0]
        dims = node.arg(1, "dim")
        keepdim = bool(node.arg(2, "keepdim", False))
        if not isinstance(src, NodeRef) or not isinstance(dims, list) or len(dims) != 1:
            continue
        lin = graph.node(src.node)
        if lin.op != "aten.linear.default" or _single_user(graph, users, lin.name) != node.name:
            continue
        out_meta, lin_meta = node.meta, lin.meta
        if out_meta is None or lin_meta is None or dims[0] not in (-1, lin_meta.rank - 1):
            continue
        x, w = lin.args[0], lin.args[1]
        b = lin.arg(2, "bias")
        if not isinstance(x, NodeRef) or not isinstance(w, NodeRef):
            continue
        w_meta, x_meta = graph.node(w.node).meta, graph.node(x.node).meta
        if w_meta is None or x_meta is None or w_meta.rank != 2:
            continue
        s = node.name
        common = {"line": node.line, "module_path": lin.module_path,
                  "module_type": lin.module_type, "synthetic": True}
        wsum = Node(f"{s}_wsum", "aten.sum.dim_IntList", (w, [0]), {},
                    (TensorMeta((w_meta.shape[1],), (w_meta.example_shape[1],), w_meta.dtype),),
                    **common)
        xw = Node(f"{s}_xw", "aten.mul.Tensor", (x, NodeRef(wsum.name)), {}, (x_meta,), **common)
        new = [wsum, xw]
        if isinstance(b, NodeRef):
            b_meta = graph.node(b.node).meta
            dot = Node(f"{s}_dot", "aten.sum.dim_IntList", (NodeRef(xw.name), [-1], keepdim), {},
                       (out_meta,), **common)
            bsum = Node(f"{s}_bsum", "aten.sum.dim_IntList", (b, [0]), {},
                        (TensorMeta((), (), b_meta.dtype if b_meta else out_meta.dtype),),
                        **common)
            final = Node(s, "aten.add.Tensor", (NodeRef(dot.name), NodeRef(bsum.name)), {},
                         (out_meta,), **common)
            new += [dot, bsum]
        else:
            final = Node(s, "aten.sum.dim_IntList", (NodeRef(xw.name), [-1], keepdim), {},
                         (out_meta,), **common)
        edits += [GraphEdit(n, before=s) for n in new] + [GraphEdit(final)]
        algebraic |= {n.name for n in new} | {s}
        notes.append(f"line {node.line}: linear(...).sum(-1) rewritten as "
                     f"(x * W.sum(0)).sum(-1){' + b.sum()' if isinstance(b, NodeRef) else ''}: "
                     "no GEMM, exact up to fp32 summation order")
    return edits, algebraic, notes


def conv_bias_adds(graph: Graph) -> dict[str, str]:
    """The bias adds `conv_bias` made (or copies of them, e.g. recomputed in a prologue): add
    node name -> the convolution it came from (`{conv}_nobias` + `{conv}_bias_view`)."""
    found: dict[str, str] = {}
    for n in graph.nodes:
        if n.op != "aten.add.Tensor" or len(n.args) < 2 or not all(
                isinstance(a, NodeRef) for a in n.args[:2]):
            continue
        a, b = n.args[0].node, n.args[1].node
        if a.endswith("_nobias") and b == f"{a[:-len('_nobias')]}_bias_view":
            found[n.name] = a[:-len("_nobias")]
    return found


_POINTWISE_CONVS = {"aten.conv1d.default": 1, "aten.conv2d.default": 2, "aten.conv3d.default": 3}


def _pointwise_conv(graph: Graph, node: Node) -> bool:
    """A 1x1(x1) convolution with stride 1, no padding, no dilation (any groups, any bias)."""
    nd = _POINTWISE_CONVS.get(node.op)
    if nd is None or not isinstance(node.args[1], NodeRef) or not isinstance(node.args[0], NodeRef):
        return False
    weight = graph.node(node.args[1].node).meta
    ones = (lambda v, one: v in (one, [one] * nd, (one,) * nd, [one], (one,)))  # noqa: E731
    return (weight is not None and tuple(weight.shape[2:]) == (1,) * nd and ones(node.arg(3, "stride", 1), 1)
            and ones(node.arg(4, "padding", 0), 0) and ones(node.arg(5, "dilation", 1), 1))


def _pool_before_pointwise_conv(graph: Graph):
    """``avg_pool(conv1x1(z))`` as ``conv1x1(avg_pool(z))`` (module docstring): a pool of z named
    `{pool}_first`, then the conv named as the pool."""
    users = graph.users()
    edits: list[GraphEdit] = []
    for pool in graph.nodes:
        kind_nd = POOL_OPS.get(pool.op)
        if kind_nd is None or kind_nd[0] == "max" or not isinstance(pool.args[0], NodeRef) or pool.meta is None:
            continue
        conv = graph.node(pool.args[0].node)
        if not _pointwise_conv(graph, conv) or _POINTWISE_CONVS[conv.op] != kind_nd[1] \
                or _single_user(graph, users, conv.name) != pool.name or conv.meta is None:
            continue
        z = graph.node(conv.args[0].node).meta
        batched = kind_nd[1] + 2  # [N, C, *spatial]: an unbatched conv keeps its order
        if z is None or z.rank != batched or conv.meta.rank != batched or pool.meta.rank != batched \
                or 2 * math.prod(pool.meta.example_shape[2:]) > math.prod(conv.meta.example_shape[2:]):
            continue
        if conv.arg(2, "bias") is not None and kind_nd[0] == "avg":
            padding = pool.arg(3, "padding", 0)
            padded = any(p != 0 for p in (padding if isinstance(padding, (list, tuple)) else [padding]))
            if (padded and pool.arg(5, "count_include_pad", True)) or pool.arg(6, "divisor_override") is not None:
                continue
        common = synthetic_fields(pool)
        meta = TensorMeta(z.shape[:2] + pool.meta.shape[2:], z.example_shape[:2] + pool.meta.example_shape[2:],
                          pool.meta.dtype)
        first = Node(f"{pool.name}_first", pool.op, (conv.args[0],) + tuple(pool.args[1:]), dict(pool.kwargs),
                     (meta,), **common)
        edits += [GraphEdit(first, before=pool.name),
                  GraphEdit(renamed(pool, op=conv.op, args=(NodeRef(first.name),) + tuple(conv.args[1:]),
                                    kwargs=dict(conv.kwargs), synthetic=True))]
    notes = [f"{len(edits) // 2} average pool(s) after a 1x1 convolution moved before it (exact: both "
             "linear, the conv per pixel): the conv runs on the pooled pixels"] if edits else []
    return edits, set(), notes


def _tiling_window(params: dict | str) -> bool:
    """Whether pooling `params` (pool_params) tile the input: fixed windows, each its own stride,
    no padding, dilation, ceil mode or divisor override."""
    return not isinstance(params, str) and params["kind"] != "adaptive_avg" \
        and params["stride"] == params["kernel"] and not any(params["padding"]) \
        and set(params["dilation"]) == {1} and not params["ceil_mode"] and not params["divisor"]


def _stacked_pools(graph: Graph):
    """``pool(pool(x, k1), k2)`` as ``pool(x, k1 * k2)`` (module docstring): the second pool
    renamed in place, reading x; the first, read by nothing else, is left unscheduled."""
    users = graph.users()
    edits: list[GraphEdit] = []
    merged: set[str] = set()
    for outer in graph.nodes:
        if outer.op not in POOL_OPS or not isinstance(outer.args[0], NodeRef):
            continue
        inner = graph.node(outer.args[0].node)
        # a chain of three: the middle pool already merged with the first (rules run once, so
        # the third stays a pool of that one: correct, one pool short of the most it could be)
        if inner.op != outer.op or inner.name in merged or users.get(inner.name) != [outer.name] \
                or not isinstance(inner.args[0], NodeRef) or inner.meta is None:
            continue
        # an integer average truncates after each pool: avg(avg(x)) is not the composed average
        if POOL_OPS[outer.op][0] == "avg" and not (float_tensors(graph, inner) and float_tensors(graph, outer)):
            continue
        src = graph.node(inner.args[0].node).meta
        if src is None:
            continue
        first, second = pool_params(inner, src.rank), pool_params(outer, inner.meta.rank)
        if not (_tiling_window(first) and _tiling_window(second)):
            continue
        window = [a * b for a, b in zip(first["kernel"], second["kernel"], strict=True)]
        edits.append(GraphEdit(renamed(outer, args=(inner.args[0], window, window), kwargs={}, synthetic=True)))
        merged.add(outer.name)
    notes = [f"{len(edits)} pool(s) of a pool read as one pool of the composed window (exact: the "
             "windows tile their inputs): the first pool's output is never stored"] if edits else []
    return edits, set(), notes


_SPATIAL_MEAN_CONVS = {"aten.conv2d.default": False, "aten.conv_transpose2d.input": True}  # op -> transposed
_SCALAR_OPS = frozenset({"aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar"})


def _is_scalar(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _conv_geometry(conv: Node) -> dict | None:
    """The 2-D conv's stride, padding, dilation and output padding as pairs (groups 1), or None."""
    transposed = _SPATIAL_MEAN_CONVS[conv.op]
    names = (("stride", 3, 1), ("padding", 4, 0), ("output_padding", 5, 0), ("groups", 6, 1),
             ("dilation", 7, 1)) if transposed else (("stride", 3, 1), ("padding", 4, 0),
                                                     ("dilation", 5, 1), ("groups", 6, 1))
    values = {name: conv.arg(index, name, default) for name, index, default in names}
    if values.pop("groups") != 1:
        return None
    pairs = {name: per_dim(v, 2, []) for name, v in values.items()}  # (h, w) as lists
    if any(p is None for p in pairs.values()):
        return None
    pairs = {name: tuple(p) for name, p in pairs.items()}
    if min(pairs["stride"] + pairs["dilation"]) < 1 \
            or min(pairs["padding"] + pairs.get("output_padding", (0, 0))) < 0:
        return None
    return {**pairs, "output_padding": pairs.get("output_padding", (0, 0)), "transposed": transposed}


def _conv_spatial_mean(graph: Graph):
    """``conv2d(x, W, b)`` (or transposed) [then scalar muls / divs] then the mean over both
    spatial dims, as the taps' means through the weights (module docstring)."""
    users = graph.users()
    edits: list[GraphEdit] = []
    algebraic: set[str] = set()
    notes: list[str] = []
    for mean in graph.nodes:
        if mean.op != "aten.mean.dim" or mean.kwargs.get("dtype") is not None or mean.meta is None \
                or not isinstance(mean.args[0], NodeRef):
            continue
        dims = mean.arg(1, "dim")
        keepdim = bool(mean.arg(2, "keepdim", False))
        if not isinstance(dims, (list, tuple)) or sorted(d % 4 for d in dims) != [2, 3]:
            continue
        chain: list[Node] = []  # the scalar ops between the conv and the mean, last first
        node = graph.node(mean.args[0].node)
        while node.op in _SCALAR_OPS and isinstance(node.args[0], NodeRef) and len(node.args) >= 2 \
                and _is_scalar(node.args[1]) and not node.kwargs:
            chain.append(node)
            node = graph.node(node.args[0].node)
        conv = node
        path = [conv] + chain[::-1]
        if conv.op not in _SPATIAL_MEAN_CONVS or conv.meta is None or conv.meta.rank != 4 \
                or any(_single_user(graph, users, a.name) != b.name for a, b in zip(path, path[1:] + [mean])):
            continue
        x, w, b = conv.args[0], conv.args[1], conv.arg(2, "bias")
        geometry = _conv_geometry(conv)
        if not isinstance(x, NodeRef) or not isinstance(w, NodeRef) or geometry is None:
            continue
        x_meta, w_meta = graph.node(x.node).meta, graph.node(w.node).meta
        if x_meta is None or w_meta is None or x_meta.rank != 4 or w_meta.rank != 4 \
                or {x_meta.dtype, w_meta.dtype, mean.meta.dtype} != {"float32"} \
                or not all(isinstance(k, int) for k in w_meta.shape):
            continue
        kh, kw = int(w_meta.shape[2]), int(w_meta.shape[3])
        taps = kh * kw
        c_in, c_out = (w_meta.shape[0], w_meta.shape[1]) if geometry["transposed"] else (w_meta.shape[1], w_meta.shape[0])
        if taps > CONV_TAP_MEANS_MAX_TAPS or x_meta.shape[1] != c_in:
            continue
        s = mean.name
        common = synthetic_fields(mean)
        n_sym, n_ex = x_meta.shape[0], x_meta.example_shape[0]
        meta = lambda shape, example: TensorMeta(shape, example, "float32")  # noqa: E731
        tap_means = Node(f"{s}_tap_means", CONV_TAP_MEANS_OP, (x,),
                         {"kernel": [kh, kw], **{k: list(v) for k, v in geometry.items() if k != "transposed"},
                          "transposed": geometry["transposed"]},
                         (meta((c_in, n_sym, taps), (c_in, n_ex, taps)),), **common)
        # W as [C_in, kh*kw, C_out] (views): transposed [C_in, C_out, kh, kw], else [C_out, C_in, kh, kw]
        w_view = Node(f"{s}_w_taps", "aten.view.default",
                      (w, [w_meta.shape[0], w_meta.shape[1], taps]), {},
                      (meta((w_meta.shape[0], w_meta.shape[1], taps), (w_meta.shape[0], w_meta.shape[1], taps)),),
                      **common)
        w_perm = Node(f"{s}_w_by_tap", "aten.permute.default",
                      (NodeRef(w_view.name), [0, 2, 1] if geometry["transposed"] else [1, 2, 0]), {},
                      (meta((c_in, taps, c_out), (c_in, taps, c_out)),), **common)
        per_channel = Node(f"{s}_per_channel", "aten.bmm.default", (NodeRef(tap_means.name), NodeRef(w_perm.name)),
                           {}, (meta((c_in, n_sym, c_out), (c_in, n_ex, c_out)),), **common)
        flat = meta((n_sym, c_out), (n_ex, c_out))
        value = Node(f"{s}_sum", "aten.sum.dim_IntList", (NodeRef(per_channel.name), [0]), {}, (flat,), **common)
        new = [tap_means, w_view, w_perm, per_channel, value]
        if isinstance(b, NodeRef):
            value = Node(f"{s}_bias", "aten.add.Tensor", (NodeRef(value.name), b), {}, (flat,), **common)
            new.append(value)
        for op in path[1:]:  # the scalars, in their order, on the [N, C_out] means
            value = Node(f"{s}_{op.name}", op.op, (NodeRef(value.name),) + tuple(op.args[1:]), {}, (flat,), **common)
            new.append(value)
        if keepdim:
            inner = Node(f"{s}_unsqueeze", "aten.unsqueeze.default", (NodeRef(value.name), -1), {},
                         (meta((n_sym, c_out, 1), (n_ex, c_out, 1)),), **common)
            new.append(inner)
            final = Node(s, "aten.unsqueeze.default", (NodeRef(inner.name), -1), {}, mean.outputs, **common)
        else:
            final = renamed(new.pop(), name=s)
        edits += [GraphEdit(n, before=s) for n in new] + [GraphEdit(final)]
        algebraic |= {n.name for n in new} | {s}
        notes.append(f"line {mean.line}: the spatial mean of a {kh}x{kw} "
                     f"{'transposed ' if geometry['transposed'] else ''}convolution computed from each "
                     "kernel tap's mean input through the weights (exact: the conv is linear); the conv "
                     "output is never computed")
    return edits, algebraic, notes


def _conv_bias(graph: Graph, keep: frozenset[str] = frozenset()):
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op not in CONV_OPS or node.synthetic or node.name in keep:
            continue
        bias = node.arg(2, "bias")
        meta = node.meta
        if not isinstance(bias, NodeRef) or meta is None or meta.rank < 3:
            continue
        b_meta = graph.node(bias.node).meta
        if b_meta is None or b_meta.rank != 1:
            continue
        spatial = meta.rank - 2
        c = node.name
        common = synthetic_fields(node)
        args = list(node.args)
        kwargs = dict(node.kwargs)
        if len(args) > 2:
            args[2] = None
        else:
            kwargs["bias"] = None
        conv = Node(f"{c}_nobias", node.op, tuple(args), kwargs, node.outputs, **common)
        bview = channel_view(f"{c}_bias_view", bias, b_meta, spatial, common)
        add = Node(c, "aten.add.Tensor", (NodeRef(conv.name), NodeRef(bview.name)), {},
                   node.outputs, **common)
        edits += [GraphEdit(conv, before=c), GraphEdit(bview, before=c), GraphEdit(add)]
    return edits, set(), []


def _batch_norm(graph: Graph):
    """batch_norm as a statistics kernel (training mode) or the running statistics (eval mode),
    then elementwise ops over per-channel views: ``(x - mean) * rstd * weight + bias``, which
    fuse with the conv / GEMM epilogue before and the ops after."""
    edits: list[GraphEdit] = []
    notes: list[str] = []
    users = graph.users()
    for node in graph.nodes:
        if node.op != "aten.batch_norm.default":
            continue
        new = _batch_norm_nodes(graph, users, node)
        if new:
            edits += _replacing(new, node.name)
            how = ("a statistics kernel (batch mean and variance per channel; it updates the "
                   "running statistics)" if _training(node) else "the running statistics (eval mode)")
            notes.append(f"line {node.line or '?'}: batch_norm normalises with {how}, then "
                         "(x - mean) * rstd * weight + bias fuses with its neighbours")
    return edits, set(), notes


def _training(node: Node) -> bool:
    return node.arg(5, "training", True) is not False


def _batch_norm_nodes(graph: Graph, users: dict[str, list[str]], node: Node) -> list[Node] | None:
    """The nodes computing a batch_norm, the last one named as `node` (None when an operand is
    not a tensor of the input's dtype, or training mode's kernel does not apply: momentum None,
    not float32)."""
    x, weight, bias = node.args[0], node.arg(1, "weight"), node.arg(2, "bias")
    mean, var = node.arg(3, "running_mean"), node.arg(4, "running_var")
    eps, momentum, training = node.arg(7, "eps", 1e-5), node.arg(6, "momentum", 0.1), _training(node)
    meta = node.meta
    stats_ok = (mean is None and var is None) or all(isinstance(r, NodeRef) for r in (mean, var))
    if (not isinstance(x, NodeRef) or meta is None or meta.rank < 2 or not isinstance(eps, (int, float))
            or any(v is not None and not isinstance(v, NodeRef) for v in (weight, bias))
            or not (stats_ok if training else isinstance(mean, NodeRef) and isinstance(var, NodeRef))
            or (training and (not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1
                              or eps < 0 or meta.dtype != "float32"))):
        return None
    metas = [graph.node(r.node).meta for r in (mean, var, weight, bias) if r is not None]
    if any(m is None or m.rank != 1 or m.dtype != meta.dtype for m in metas):
        return None
    if training and mean is not None and any(
            users.get(r.node, []) != [node.name] for r in (mean, var)):
        return None  # a kernel after the statistics kernel would read the updated buffer
    common = synthetic_fields(node)
    spatial = meta.rank - 2
    channels, example = meta.shape[1], meta.example_shape[1]
    row = TensorMeta((channels,), (example,), meta.dtype)
    vec = TensorMeta((channels,) + (1,) * spatial, (example,) + (1,) * spatial, meta.dtype)
    new: list[Node] = []

    def channel(ref: NodeRef, label: str) -> NodeRef:  # [C] -> [C, 1, ...] against x
        if not spatial:
            return ref
        new.append(channel_view(f"{node.name}_{label}_view", ref, row, spatial, common))
        return NodeRef(new[-1].name)

    def op(label: str, aten: str, args: tuple, out: TensorMeta, kwargs: dict | None = None) -> NodeRef:
        new.append(Node(f"{node.name}_{label}", aten, args, kwargs or {}, (out,), **common))
        return NodeRef(new[-1].name)

    if training:
        stats = op("stats", BATCH_STATS_OP, (x, mean, var), TensorMeta((2, channels), (2, example), "float32"),
                   {"eps": float(eps), "momentum": float(momentum)})
        m = channel(op("mean", "aten.select.int", (stats, 0, 0), row), "mean")
        rstd = channel(op("rstd", "aten.select.int", (stats, 0, 1), row), "rstd")
    else:
        m, v = channel(mean, "mean"), channel(var, "var")
        rstd = op("rstd", "aten.rsqrt.default", (op("var_eps", "aten.add.Tensor", (v, float(eps)), vec),), vec)
    y = op("normed", "aten.mul.Tensor", (op("centered", "aten.sub.Tensor", (x, m), meta), rstd), meta)
    if weight is not None:
        y = op("scaled", "aten.mul.Tensor", (y, channel(weight, "weight")), meta)
    if bias is not None:
        op("shifted", "aten.add.Tensor", (y, channel(bias, "bias")), meta)
    new[-1] = renamed(new[-1], name=node.name)  # the last op defines the batch_norm's value
    return new


def _concatenated_parts(graph: Graph, stats: Node) -> list[NodeRef] | None:
    """The tensors a batch_norm statistics node's input concatenates along the channels (dim 1),
    when each is a float32 tensor of the input's rank and they are 2 to the merge kernel's most."""
    x = stats.args[0]
    cat = graph.node(x.node) if isinstance(x, NodeRef) else None
    if cat is None or cat.op != CAT_OP or cat.meta is None or not cat.args or not isinstance(cat.args[0], list):
        return None
    rank, dim = cat.meta.rank, cat.arg(1, "dim", 0)
    parts = cat.args[0]
    if not isinstance(dim, int) or dim % rank != 1 or not 2 <= len(parts) <= BATCH_STATS_MERGE_MAX_PARTS:
        return None
    metas = [graph.node(p.node).meta if isinstance(p, NodeRef) else None for p in parts]
    if any(m is None or m.rank != rank or m.dtype != "float32" for m in metas):
        return None
    return list(parts)


def _batch_stats_of_cat(graph: Graph):
    """Training-mode batch_norm statistics of a concatenation along the channels, as each
    concatenated tensor's statistics merged (DenseNet: every layer normalises the cat of the
    block's input and all earlier layers' outputs, so each tensor's statistics are computed
    once, not once per later layer: a block of L layers read its features L(L+1)/2 times).
    Exact: a channel of the cat is a channel of one concatenated tensor, and its mean and
    variance over the batch and spatial dims are that channel's.  Only where a concatenated
    tensor is shared by two such statistics (else the parts cost what the cat did, in more
    launches)."""
    candidates = {n.name: parts for n in graph.nodes if n.op == BATCH_STATS_OP and not n.kwargs.get("groups")
                  for parts in [_concatenated_parts(graph, n)] if parts}
    counts: dict[tuple[str, float], int] = {}  # (tensor, eps): statistics of one eps are shared
    for name, parts in candidates.items():
        eps = float(graph.node(name).kwargs["eps"])
        for key in {(p.node, eps) for p in parts}:
            counts[key] = counts.get(key, 0) + 1
    edits: list[GraphEdit] = []
    # (tensor, eps) -> a statistics node of it, earlier in the graph: the rewrite's own, or a
    # batch_norm's of the tensor alone (its [2, C] is the same whatever running statistics it updates)
    moments: dict[tuple[str, float], str] = {}
    notes: list[str] = []
    for node in graph.nodes:
        if node.op != BATCH_STATS_OP:
            continue
        parts = candidates.get(node.name)
        if not parts:
            if isinstance(node.args[0], NodeRef) and not node.kwargs.get("groups"):  # per channel only
                moments.setdefault((node.args[0].node, float(node.kwargs["eps"])), node.name)
            continue
        eps = float(node.kwargs["eps"])
        if not any(counts[(p.node, eps)] > 1 for p in parts):
            continue
        common = synthetic_fields(node)
        new: list[Node] = []
        refs = []
        for part in parts:
            key = (part.node, eps)
            if key not in moments:
                channels = graph.node(part.node).meta
                meta = TensorMeta((2, channels.shape[1]), (2, channels.example_shape[1]), "float32")
                moments[key] = f"{part.node}_stats_eps{len(moments)}"
                new.append(Node(moments[key], BATCH_STATS_OP, (part, None, None), {
                    "eps": eps, "momentum": float(node.kwargs["momentum"])}, (meta,), **common))
            refs.append(NodeRef(moments[key]))
        new.append(Node(node.name, BATCH_STATS_MERGE_OP, (refs, node.args[0], *node.args[1:3]),
                        dict(node.kwargs), node.outputs, **common))
        edits += _replacing(new, node.name)
        notes.append(f"line {node.line or '?'}: batch_norm statistics of a concatenation merged "
                     f"from its {len(parts)} tensors' own (each computed once)")
    return edits, set(), notes


_VALUES_OF = {"aten.max.dim": "aten.amax.default", "aten.min.dim": "aten.amin.default"}


def _max_values(graph: Graph):
    users = graph.users()
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op not in _VALUES_OF:
            continue
        readers = users.get(node.name, [])
        items = [graph.node(r) for r in readers if r != "<output>"]
        if len(items) != len(readers) or any(i.op != "getitem" for i in items):
            continue
        # export keeps a getitem for the indices even when nothing reads them
        if any(i.args[1] != 0 and users.get(i.name) for i in items):
            continue
        values = [i for i in items if i.args[1] == 0]
        if not values:
            continue
        dim = node.arg(1, "dim")
        keepdim = bool(node.arg(2, "keepdim", False))
        for item in values:
            edits.append(GraphEdit(Node(item.name, _VALUES_OF[node.op],
                                        (node.args[0], [dim], keepdim), {}, item.outputs,
                                        line=item.line, module_path=item.module_path,
                                        module_type=item.module_type, synthetic=True)))
    return edits, set(), []


def _reverse_scan(graph: Graph):
    """`x.flip(d).cumsum(d).flip(d)` is one scan from the end of dim d (`kernelstitch.
    cumsum_reverse(x, d)`): the two flips are full copies a reversed index does not need.
    Exact: both flips reverse the same dim, so the output at position k sums x over k..R-1, as
    the scan from the end computes; only when each intermediate has that one reader and the scan
    is one the kernels take (floating point, an int dim, no dtype argument)."""
    users = graph.users()
    edits: list[GraphEdit] = []
    for scan in graph.nodes:
        if scan.op not in REVERSE_SCAN_OPS or scan.kwargs.get("dtype") is not None:
            continue
        inner = graph.node(scan.args[0].node) if isinstance(scan.args[0], NodeRef) else None
        outer_name = _single_user(graph, users, scan.name)
        if inner is None or inner.op != "aten.flip.default" or outer_name is None:
            continue
        outer = graph.node(outer_name)
        dim, rank = scan.arg(1, "dim"), scan.meta.rank if scan.meta else 0
        if (outer.op != "aten.flip.default" or not isinstance(dim, int) or rank == 0
                or _single_user(graph, users, inner.name) != scan.name
                or not float_tensors(graph, scan)):
            continue
        same = [dim % rank]
        if [d % rank for d in inner.arg(1, "dims")] != same or [d % rank for d in outer.arg(1, "dims")] != same:
            continue
        edits.append(GraphEdit(renamed(outer, op=REVERSE_SCAN_OPS[scan.op], args=(inner.args[0], dim),
                                       kwargs={}, synthetic=True)))
    notes = [f"{len(edits)} flip / cumulative scan / flip chain(s) read as one scan from the end "
             "of the dim (no flipped copies)"] if edits else []
    return edits, set(), notes


def _all_but_last(graph: Graph, ref: object, dim: int) -> NodeRef | None:
    """x when `ref` is ``x.narrow(dim, 0, n - 1)`` / ``x[..., :n - 1]`` along `dim` (n: x's size
    there), checked on the traced shapes (ints, or symbols as "s27" / "s27 - 1")."""
    node = graph.node(ref.node) if isinstance(ref, NodeRef) else None
    if node is None or node.meta is None or node.op not in ("aten.narrow.default", "aten.slice.Tensor"):
        return None
    x = node.args[0]
    if not isinstance(x, NodeRef) or graph.node(x.node).meta is None:
        return None
    start = node.arg(2, "start", 0)
    step = node.arg(4, "step", 1) if node.op == "aten.slice.Tensor" else 1
    full, part = graph.node(x.node).meta.shape, node.meta.shape
    rank = len(full)
    if rank == 0 or start not in (0, None) or step != 1 or not isinstance(node.arg(1, "dim"), int) \
            or node.arg(1, "dim") % rank != dim % rank or len(part) != rank:
        return None
    n, k = full[dim % rank], part[dim % rank]
    shorter = k == n - 1 if isinstance(n, int) and isinstance(k, int) else str(k) == f"{n} - 1"
    same_rest = all(a == b for i, (a, b) in enumerate(zip(full, part, strict=True)) if i != dim % rank)
    return x if shorter and same_rest else None


def _exclusive_scan(graph: Graph):
    """``cat((identity [.., 1, ..], scan(x.narrow(d, 0, n - 1), d)), d)`` as one exclusive scan of
    x (`kernelstitch.cumsum_exclusive`); only when the scan has that one reader, the leading block
    is a fill with the scan's identity of the output's dtype, and the shapes say so."""
    users = graph.users()
    edits: list[GraphEdit] = []
    for cat in graph.nodes:
        if cat.op != "aten.cat.default" or cat.meta is None or not isinstance(cat.args[0], (list, tuple)) \
                or len(cat.args[0]) != 2 or not all(isinstance(r, NodeRef) for r in cat.args[0]):
            continue
        d, rank = cat.arg(1, "dim", 0), cat.meta.rank
        fill, scan = (graph.node(r.node) for r in cat.args[0])
        if scan.op not in EXCLUSIVE_SCAN_OPS or not isinstance(d, int) or rank == 0 \
                or scan.kwargs.get("dtype") is not None or _single_user(graph, users, scan.name) != cat.name:
            continue
        op, identity = EXCLUSIVE_SCAN_OPS[scan.op], SCAN_IDENTITY[SCAN_KINDS[scan.op]]
        dim = scan.arg(1, "dim")
        x = _all_but_last(graph, scan.args[0], d) if isinstance(dim, int) and dim % rank == d % rank else None
        if x is None or FILL_VALUES.get(fill.op) != identity or fill.meta is None or fill.meta.dtype != cat.meta.dtype \
                or fill.meta.shape[d % rank] != 1 or graph.node(x.node).meta.shape != cat.meta.shape \
                or not float_tensors(graph, scan):
            continue
        edits.append(GraphEdit(renamed(cat, op=op, args=(x, dim), kwargs={}, synthetic=True)))
    notes = [f"{len(edits)} cat of the identity and a scan of all but the last value read as one "
             "exclusive scan (no narrowed scan stored, no copy into the cat)"] if edits else []
    return edits, set(), notes


def _global_avg_pool(graph: Graph):
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if POOL_OPS.get(node.op, ("",))[0] != "adaptive_avg" or not isinstance(node.args[0], NodeRef):
            continue
        src = graph.node(node.args[0].node).meta
        params = pool_params(node, src.rank) if src is not None else "no shape"
        if isinstance(params, str) or params["output_size"] != (1,) * params["nd"]:
            continue
        dims = list(range(src.rank - params["nd"], src.rank))
        edits.append(GraphEdit(renamed(node, op="aten.mean.dim", args=(node.args[0], dims, True),
                                       kwargs={}, synthetic=True)))
    return edits, set(), []


_NORM_REDUCTION = {1.0: ("aten.abs.default", "aten.sum.dim_IntList"),
                   2.0: ("aten.mul.Tensor", "aten.sum.dim_IntList"),
                   float("inf"): ("aten.abs.default", "aten.amax.default")}


def _vector_norm(graph: Graph):
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op != "aten.linalg_vector_norm.default" or not isinstance(node.args[0], NodeRef):
            continue
        x, order = node.args[0], node.arg(1, "ord", 2)
        dim, keepdim = node.arg(2, "dim", None), bool(node.arg(3, "keepdim", False))
        src = graph.node(x.node).meta
        if (src is None or node.meta is None or node.kwargs.get("dtype") is not None
                or src.dtype not in ("float32", "float16", "bfloat16") or src.rank == 0
                or not isinstance(order, (int, float)) or isinstance(order, bool)
                or float(order) not in _NORM_REDUCTION):
            continue
        dims = list(range(src.rank)) if dim is None or dim == [] else (
            [dim] if isinstance(dim, int) else list(dim))
        if not all(isinstance(d, int) for d in dims):
            continue
        dims = sorted(d % src.rank for d in dims)
        pointwise, reduce = _NORM_REDUCTION[float(order)]
        common = synthetic_fields(node)
        args = (x, x) if pointwise == "aten.mul.Tensor" else (x,)
        mapped = Node(f"{node.name}_terms", pointwise, args, {}, (src,), **common)
        edits.append(GraphEdit(mapped, before=node.name))
        total = (NodeRef(mapped.name), dims, keepdim)
        if float(order) == 2.0:
            summed = Node(f"{node.name}_sum", reduce, total, {}, node.outputs, **common)
            edits.append(GraphEdit(summed, before=node.name))
            edits.append(GraphEdit(renamed(node, op="aten.sqrt.default", args=(NodeRef(summed.name),),
                                           kwargs={}, synthetic=True)))
        else:
            edits.append(GraphEdit(renamed(node, op=reduce, args=total, kwargs={}, synthetic=True)))
    return edits, set(), []


# Binary ops that broadcast their operands (torch rules): an operand expanded to the result's
# own shape reads the same values unexpanded.
_BROADCASTING = frozenset({"aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor"})


def _broadcast_expands(graph: Graph):
    """`x / denom.expand_as(x)` (F.normalize's form) read as `x / denom`: an expand feeding a
    broadcasting binary op whose result keeps its shape with the unexpanded operand (checked on
    the operands' shapes: two expands of [1, 3] to [4, 3] keep theirs).  Exact (broadcasting is
    the expand), and it leaves x one reader fewer: expand_as reads x only for its sizes, but as a
    reader it kept x out of the kernel that divides it."""
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op not in _BROADCASTING or node.kwargs or node.meta is None or len(node.args) != 2:
            continue
        args = list(node.args)
        for k, a in enumerate(node.args):
            src = graph.node(a.node) if isinstance(a, NodeRef) else None
            if src is None or src.op not in ("aten.expand_as.default", "aten.expand.default") \
                    or not isinstance(src.args[0], NodeRef):
                continue
            inner = graph.node(src.args[0].node).meta
            # a 0-d tensor promotes like a scalar unexpanded (int32 x a 0-d int64 stays int32)
            if inner is None or inner.rank == 0 or inner.dtype != node.meta.dtype:
                continue
            trial = args[:k] + [src.args[0]] + args[k + 1:]
            shapes = [tuple(graph.node(t.node).meta.shape) for t in trial
                      if isinstance(t, NodeRef) and graph.node(t.node).meta is not None]
            if len(shapes) != sum(isinstance(t, NodeRef) for t in trial):
                continue
            total: tuple | None = ()
            for shape in shapes:
                total = broadcast(total, shape) if total is not None else None
            if total == tuple(node.meta.shape):
                args = trial
        if args != list(node.args):
            edits.append(GraphEdit(renamed(node, args=tuple(args))))
    return edits, set(), []


_FULL_REDUCTIONS = {"aten.mean.default": "aten.mean.dim", "aten.sum.default": "aten.sum.dim_IntList"}


def _full_reduction(graph: Graph):
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op not in _FULL_REDUCTIONS or not isinstance(node.args[0], NodeRef) or node.kwargs.get("dtype"):
            continue
        src = graph.node(node.args[0].node).meta
        if src is None or src.rank == 0 or src.dtype not in ("float32", "float16", "bfloat16"):
            continue
        edits.append(GraphEdit(renamed(node, op=_FULL_REDUCTIONS[node.op],
                                       args=(node.args[0], list(range(src.rank)), False), kwargs={},
                                       synthetic=True)))
    return edits, set(), []


def _through_broadcast(graph: Graph, ref: NodeRef, shape: tuple) -> NodeRef:
    """`ref`, or the tensor it is `broadcast_tensors(...)[i]` of when that already has `shape`."""
    node = graph.node(ref.node)
    if node.op == "getitem" and isinstance(node.args[0], NodeRef):
        source = graph.node(node.args[0].node)
        if source.op == "aten.broadcast_tensors.default" and isinstance(node.args[1], int):
            inner = source.args[0][node.args[1]] if isinstance(source.args[0], (list, tuple)) else None
            if isinstance(inner, NodeRef):
                meta = graph.node(inner.node).meta
                if meta is not None and meta.shape == shape:
                    return inner
    return ref


_LOSS_REDUCTION = {0: None, 1: "aten.mean.dim", 2: "aten.sum.dim_IntList"}  # torch's Reduction enum


def _reduced_loss(new: list[Node], node: Node, reduction: int, rank: int, common: dict) -> list[Node]:
    """A loss's nodes ended by torch's reduction of the last one's per-element values (none, mean
    or sum over all `rank` dims), the last node named and typed as the loss `node`."""
    total = _LOSS_REDUCTION[reduction]
    if total is None:
        new[-1] = renamed(new[-1], name=node.name, outputs=node.outputs)
    else:
        new.append(Node(node.name, total, (NodeRef(new[-1].name), list(range(rank)), False), {},
                        node.outputs, **common))
    return new


def _replacing(new: list[Node], name: str) -> list[GraphEdit]:
    """Edits inserting `new[:-1]` before node `name` and replacing it with `new[-1]`."""
    return [GraphEdit(k, before=name) for k in new[:-1]] + [GraphEdit(new[-1])]


def _replace_each(graph: Graph, op: str, build: Callable[[Graph, Node], list[Node] | None]):
    """A rule replacing every `op` node by the nodes `build` returns for it (None: kept)."""
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op == op:
            new = build(graph, node)
            if new:
                edits += _replacing(new, node.name)
    return edits, set(), []


def _smooth_l1(graph: Graph):
    return _replace_each(graph, "aten.smooth_l1_loss.default", _smooth_l1_nodes)


def _smooth_l1_nodes(graph: Graph, node: Node) -> list[Node] | None:
    """The nodes computing a smooth_l1_loss, the last one named as `node` (None when the operands
    are not float tensors of one shape and dtype, or the reduction or beta is unusual)."""
    a, b = node.args[0], node.args[1]
    reduction, beta = node.arg(2, "reduction", 1), node.arg(3, "beta", 1.0)
    if not (isinstance(a, NodeRef) and isinstance(b, NodeRef)) or reduction not in _LOSS_REDUCTION \
            or not isinstance(beta, (int, float)) or isinstance(beta, bool) or beta <= 0:
        return None
    ma, mb = graph.node(a.node).meta, graph.node(b.node).meta
    if ma is None or mb is None or ma.shape != mb.shape or ma.dtype != mb.dtype \
            or ma.dtype not in ("float32", "float16", "bfloat16") or node.meta is None:
        return None
    a, b = _through_broadcast(graph, a, ma.shape), _through_broadcast(graph, b, mb.shape)
    common = synthetic_fields(node)
    new: list[Node] = []

    def op(label: str, aten: str, args: tuple) -> NodeRef:
        new.append(Node(f"{node.name}_{label}", aten, args, {}, (ma,), **common))
        return NodeRef(new[-1].name)

    d = op("abs", "aten.abs.default", (op("diff", "aten.sub.Tensor", (a, b)),))
    m = op("small", "aten.clamp.default", (d, None, float(beta)))
    quad = op("quad", "aten.mul.Tensor", (op("square", "aten.mul.Tensor", (m, m)), 0.5 / float(beta)))
    op("loss", "aten.add.Tensor", (quad, op("linear", "aten.sub.Tensor", (d, m))))
    return _reduced_loss(new, node, reduction, ma.rank, common)


def _triplet_margin(graph: Graph):
    return _replace_each(graph, "aten.triplet_margin_loss.default", _triplet_margin_nodes)


def _triplet_margin_nodes(graph: Graph, node: Node) -> list[Node] | None:
    """The nodes computing a triplet_margin_loss of p = 2 without swap, the last one named as
    `node` (None otherwise, or when the three operands are not float tensors of one shape)."""
    anchor, positive, negative = node.args[0], node.args[1], node.args[2]
    margin, order, eps = node.arg(3, "margin", 1.0), node.arg(4, "p", 2), node.arg(5, "eps", 1e-6)
    swap, reduction = node.arg(6, "swap", False), node.arg(7, "reduction", 1)
    refs = (anchor, positive, negative)
    if not all(isinstance(r, NodeRef) for r in refs) or swap is not False or reduction not in _LOSS_REDUCTION \
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (margin, order, eps)) \
            or float(order) != 2.0 or node.meta is None:
        return None
    metas = [graph.node(r.node).meta for r in refs]
    if any(m is None or m.shape != metas[0].shape or m.dtype != metas[0].dtype for m in metas) \
            or metas[0].dtype not in ("float32", "float16", "bfloat16") or metas[0].rank < 2:
        return None
    full = metas[0]
    rows = TensorMeta(full.shape[:-1], full.example_shape[:-1], full.dtype)
    common = synthetic_fields(node)
    new: list[Node] = []

    def op(label: str, aten: str, args: tuple, meta: TensorMeta) -> NodeRef:
        new.append(Node(f"{node.name}_{label}", aten, args, {}, (meta,), **common))
        return NodeRef(new[-1].name)

    def distance(label: str, other: NodeRef) -> NodeRef:  # pairwise_distance(anchor, other, 2, eps)
        shifted = op(f"{label}_shift", "aten.add.Tensor", (op(f"{label}_diff", "aten.sub.Tensor", (anchor, other), full),
                                                           float(eps)), full)
        squares = op(f"{label}_sq", "aten.mul.Tensor", (shifted, shifted), full)
        total = op(f"{label}_sum", "aten.sum.dim_IntList", (squares, [full.rank - 1], False), rows)
        return op(f"{label}_dist", "aten.sqrt.default", (total,), rows)

    gap = op("gap", "aten.sub.Tensor", (op("pos_margin", "aten.add.Tensor", (distance("pos", positive), float(margin)),
                                           rows), distance("neg", negative)), rows)
    op("hinge", "aten.clamp.default", (gap, 0.0, None), rows)
    return _reduced_loss(new, node, reduction, rows.rank, common)


def _masked_fill_eq(graph: Graph):
    """`masked_fill(x, eq(m, 0), v)` / `masked_fill(x, ne(m, 0), v)` as one select on m."""
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op != "aten.masked_fill.Scalar" or not isinstance(node.args[1], NodeRef):
            continue
        x, v, test = node.args[0], node.arg(2, "value"), graph.node(node.args[1].node)
        if test.op not in ("aten.eq.Scalar", "aten.ne.Scalar") or not isinstance(test.args[0], NodeRef) \
                or isinstance(test.args[1], bool) or test.args[1] != 0:
            continue
        m = graph.node(test.args[0].node).meta
        if m is None or node.meta is None or m.dtype not in (*FLOAT_DTYPES, "bool") \
                or node.meta.dtype not in FLOAT_DTYPES or not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        keep, fill = (x, float(v)) if test.op == "aten.eq.Scalar" else (float(v), x)
        edits.append(GraphEdit(renamed(node, op=WHERE_NONZERO_OP, args=(test.args[0], keep, fill),
                                       kwargs={}, synthetic=True)))
    notes = [f"{len(edits)} masked_fill(x, m == 0 / m != 0, v) read as one select on m "
             "(no bool mask built)"] if edits else []
    return edits, set(), notes


_NLL_REDUCTION = {0: "none", 1: "mean", 2: "sum"}  # torch's Reduction enum


def _cross_entropy(graph: Graph):
    return _replace_each(graph, "aten.cross_entropy_loss.default", _cross_entropy_nodes)


def _cross_entropy_nodes(graph: Graph, node: Node) -> list[Node] | None:
    """logsumexp over the classes, then `kernelstitch.nll_loss` named as `node` (None for
    probabilities as targets, class weights, label smoothing, or logits that are not [N, C]
    floating point with int64 targets [N])."""
    x, t = node.args[0], node.args[1]
    weight, reduction = node.arg(2, "weight"), node.arg(3, "reduction", 1)
    ignore, smoothing = node.arg(4, "ignore_index", -100), node.arg(5, "label_smoothing", 0.0)
    if not (isinstance(x, NodeRef) and isinstance(t, NodeRef)) or weight is not None \
            or reduction not in _NLL_REDUCTION or not isinstance(ignore, int) or isinstance(ignore, bool) \
            or smoothing != 0.0 or node.meta is None:
        return None
    mx, mt = graph.node(x.node).meta, graph.node(t.node).meta
    if mx is None or mt is None or mx.rank != 2 or mx.dtype not in FLOAT_DTYPES or mt.rank != 1 \
            or mt.dtype != "int64" or mt.shape[0] != mx.shape[0] or node.meta.dtype != mx.dtype:
        return None
    common = synthetic_fields(node)
    rows = TensorMeta(mx.shape[:1], mx.example_shape[:1], mx.dtype)
    lse = Node(f"{node.name}_lse", "aten.logsumexp.default", (x, [1], False), {}, (rows,), **common)
    nll = Node(node.name, NLL_OP, (x, t, NodeRef(lse.name)),
               {"reduction": _NLL_REDUCTION[reduction], "ignore_index": ignore}, node.outputs, **common)
    return [lse, nll]


def _kl_div(graph: Graph):
    edits: list[GraphEdit] = []
    users = graph.users()
    for node in graph.nodes:
        if node.op != "aten.kl_div.default":
            continue
        new = _kl_div_nodes(graph, users, node)
        if new:  # replacing: the node named as the kl_div and (batchmean) the division after it
            edits += [GraphEdit(k) if k.name in (node.name, *users.get(node.name, [])) else
                      GraphEdit(k, before=node.name) for k in new]
    return edits, set(), []


def _batchmean_divisor(graph: Graph, users: dict[str, list[str]], node: Node, rows: str) -> Node | None:
    """The `div` node when `node`'s only reader divides it by the size of dim 0 (`rows`) of a
    tensor: F.kl_div's batchmean."""
    readers = users.get(node.name, [])
    if len(readers) != 1 or readers[0] == "<output>":
        return None
    div = graph.node(readers[0])
    if div.op != "aten.div.Tensor" or div.args[0] != NodeRef(node.name) or not isinstance(div.args[1], NodeRef):
        return None
    size = graph.node(div.args[1].node)
    if size.op != "aten.sym_size.int" or size.args[1] != 0 or not isinstance(size.args[0], NodeRef):
        return None
    meta = graph.node(size.args[0].node).meta
    return div if meta is not None and meta.rank > 0 and meta.shape[0] == rows else None


def _kl_div_nodes(graph: Graph, users: dict[str, list[str]], node: Node) -> list[Node] | None:
    """The nodes computing a kl_div, the last one named as `node` (or as the batchmean division
    that reads it); None when the operands are not float tensors of one shape."""
    x, target = node.args[0], node.args[1]
    reduction, log_target = node.arg(2, "reduction", 1), node.arg(3, "log_target", False)
    if not (isinstance(x, NodeRef) and isinstance(target, NodeRef)) or reduction not in _LOSS_REDUCTION \
            or not isinstance(log_target, bool) or node.meta is None:
        return None
    mx, mt = graph.node(x.node).meta, graph.node(target.node).meta
    if mx is None or mt is None or mx.shape != mt.shape or mx.dtype != mt.dtype \
            or mx.dtype not in ("float32", "float16", "bfloat16") or mx.rank == 0:
        return None
    common = synthetic_fields(node)
    new: list[Node] = []

    def op(label: str, aten: str, args: tuple, meta: TensorMeta = mx) -> NodeRef:
        new.append(Node(f"{node.name}_{label}", aten, args, {}, (meta,), **common))
        return NodeRef(new[-1].name)

    if log_target:
        op("terms", "aten.mul.Tensor", (op("exp", "aten.exp.default", (target,)),
                                        op("gap", "aten.sub.Tensor", (target, x))))
    else:
        op("terms", "aten.sub.Tensor", (op("entropy", "aten.xlogy.Tensor", (target, target)),
                                        op("cross", "aten.mul.Tensor", (target, x))))
    divisor = _batchmean_divisor(graph, users, node, mx.shape[0]) if reduction == 2 and mx.rank > 1 else None
    if divisor is None:
        return _reduced_loss(new, node, reduction, mx.rank, common)
    rows = TensorMeta(mx.shape[:1], mx.example_shape[:1], mx.dtype)
    # the kl_div's own node becomes the row sums (nothing else then reads its operands)
    new.append(Node(node.name, "aten.sum.dim_IntList", (NodeRef(new[-1].name), list(range(1, mx.rank)), False), {},
                    (rows,), **common))
    new.append(Node(divisor.name, "aten.mean.dim", (NodeRef(node.name), [0], False), {}, divisor.outputs,
                    **common))
    return new


def _einsum_matmul(graph: Graph):
    edits: list[GraphEdit] = []
    for node in graph.nodes:
        if node.op != "aten.einsum.default" or not isinstance(node.args[0], str):
            continue
        operands = node.args[1] if len(node.args) > 1 else None
        if not isinstance(operands, (list, tuple)) or len(operands) != 2 \
                or not all(isinstance(r, NodeRef) for r in operands):
            continue
        if _is_matmul_equation(node.args[0].replace(" ", "")):
            edits.append(GraphEdit(renamed(node, op="aten.matmul.default", args=tuple(operands), kwargs={},
                                           synthetic=True)))
    return edits, set(), []


def _is_matmul_equation(equation: str) -> bool:
    """"PREFIXc,cn->PREFIXn" with distinct letters (no ellipsis, no repeated or summed-out free index)."""
    if "->" not in equation or "." in equation:
        return False
    inputs, out = equation.split("->")
    parts = inputs.split(",")
    if len(parts) != 2 or len(parts[1]) != 2 or not parts[0] or not all(p.isalpha() for p in (*parts, out)):
        return False
    a, b = parts
    contracted, free = b[0], b[1]
    return (a[-1] == contracted and out == a[:-1] + free and len(set(a + free)) == len(a) + 1
            and contracted not in out)


def _is_elementwise(graph: Graph, node: Node) -> bool:
    return (not node.is_placeholder and not is_host(node)
            and translate_elementwise(node) is not None and float_tensors(graph, node))


def _recompute_prologue(graph: Graph):
    # readers that no output needs (a pool merged into the next one) never run: they neither
    # anchor a recomputation nor make a chain "read elsewhere"
    live = live_nodes(graph)
    users = live_users(graph, live)
    edits: list[GraphEdit] = []
    notes: list[str] = []
    for node in graph.nodes:
        if node.op not in PROLOGUE_ANCHORS or not isinstance(node.args[0], NodeRef) or node.name not in live:
            continue
        src = graph.node(node.args[0].node)
        if not _is_elementwise(graph, src):
            continue
        chain: list[Node] = []  # src and its elementwise ancestors, program order
        leaves: list[str] = []
        stack = [src]
        while stack:
            cur = stack.pop()
            if cur in chain:
                continue
            chain.append(cur)
            for ref in cur.refs():
                dep = graph.node(ref)
                if _is_elementwise(graph, dep) and len(chain) + len(stack) < MAX_RECOMPUTED_NODES:
                    stack.append(dep)
                elif ref not in leaves:
                    leaves.append(ref)
        inside = {c.name for c in chain} | {node.name}
        if all(u in inside for c in chain for u in users.get(c.name, [])):
            continue  # nothing else reads the chain: plain prologue fusion
        full = src.meta.shape if src.meta else None
        big = [leaf for leaf in leaves
               if graph.node(leaf).meta and graph.node(leaf).meta.shape == full]
        chain_names = {c.name for c in chain}
        if not big or len(big) > MAX_RECOMPUTED_LEAVES or any(leaf in chain_names
                                                              for leaf in leaves):
            continue
        order = {n.name: k for k, n in enumerate(graph.nodes)}
        chain.sort(key=lambda n: order[n.name])
        rename = {c.name: f"{c.name}_r{node.name}" for c in chain}

        def swap(value, rename=rename):
            if isinstance(value, NodeRef):
                return NodeRef(rename.get(value.node, value.node))
            if isinstance(value, list):
                return [swap(v) for v in value]
            return value

        for c in chain:
            copy = Node(rename[c.name], c.op, tuple(swap(a) for a in c.args),
                        {k: swap(v) for k, v in c.kwargs.items()}, c.outputs, line=c.line,
                        module_path=c.module_path, module_type=c.module_type, synthetic=True)
            edits.append(GraphEdit(copy, before=node.name))
        reader = Node(node.name, node.op, tuple(swap(a) if k == 0 else a
                                                 for k, a in enumerate(node.args)),
                      dict(node.kwargs), node.outputs, node.multi_output, node.symbol,
                      node.line, node.module_path, node.module_type, node.placeholder,
                      node.synthetic)
        edits.append(GraphEdit(reader))
        notes.append(f"line {node.line}: the reduction recomputes "
                     f"{', '.join(c.name for c in chain)} in its prologue (also read elsewhere)")
    return edits, set(), notes


# ---- views through elementwise ops (module docstring: `views_through_elementwise`) ----------

_RESHAPES = frozenset({"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
                       "aten.flatten.using_ints", "aten.unflatten.int"})
_MAX_MOVED = 8  # elementwise nodes moved across one view
# the reshaping form of each view op (flatten and unflatten already copy where they must)
_AS_RESHAPE = {"aten.view.default": "aten.reshape.default",
               "aten._unsafe_view.default": "aten.reshape.default"}


def _regrouped_operand(meta: TensorMeta, full: TensorMeta, groups: list[tuple[range, range]],
                       new_full: TensorMeta) -> TensorMeta | None:
    """The meta a broadcast operand (`meta`, against the `full` value) takes against the
    reshaped value: per group, 1s where the operand is 1 across it, its own size where the group
    is one dim to one dim; None otherwise.  One symbolic size may pass (a batch dim the operand
    spans: the view spells it -1)."""
    lead = full.rank - meta.rank
    if lead < 0:
        return None
    sizes = (1,) * lead + tuple(meta.shape)
    examples = (1,) * lead + tuple(meta.example_shape)
    shape: list[int | str] = []
    example: list[int] = []
    for olds, news in groups:
        if all(examples[d] == 1 for d in olds):
            shape += [1] * len(news)
            example += [1] * len(news)
        elif len(olds) == 1 and len(news) == 1 and examples[olds[0]] == full.example_shape[olds[0]] \
                and sizes[olds[0]] == full.shape[olds[0]] and new_full.shape[news[0]] == full.shape[olds[0]]:
            shape.append(sizes[olds[0]])
            example.append(examples[olds[0]])
        else:
            return None
    if sum(isinstance(d, str) for d in shape) > 1:
        return None
    return TensorMeta(tuple(shape), tuple(example), meta.dtype)


class _ViewMover:
    """Builds the nodes of one move: elementwise nodes re-made on the reshaped value, their
    broadcast operands viewed to match."""

    def __init__(self, graph: Graph, at: Node) -> None:
        self.graph, self.common = graph, synthetic_fields(at)
        self.new: list[Node] = []

    def operand(self, value: object, full: TensorMeta, groups, new_full: TensorMeta,
                label: str) -> object | None:
        """A non-full operand against the reshaped value (None: cannot be)."""
        if not isinstance(value, NodeRef):
            return None if isinstance(value, (list, tuple, dict)) else value
        meta = self.graph.node(value.node).meta
        if meta is None or meta.dtype not in FLOAT_DTYPES:
            return None
        regrouped = _regrouped_operand(meta, full, groups, new_full)
        if regrouped is None:
            return None
        if regrouped.shape == tuple(meta.shape):
            return value
        sizes = [-1 if isinstance(d, str) else d for d in regrouped.shape]  # at most one symbolic size
        self.new.append(Node(label, "aten.view.default", (value, sizes), {}, (regrouped,), **self.common))
        return NodeRef(label)

    def remade(self, node: Node, args: tuple, meta: TensorMeta, name: str) -> NodeRef:
        self.new.append(Node(name, node.op, args, dict(node.kwargs),
                             (TensorMeta(meta.shape, meta.example_shape, node.meta.dtype),),
                             line=node.line, module_path=node.module_path,
                             module_type=node.module_type, synthetic=True))
        return NodeRef(name)


def _movable(graph: Graph, node: Node, full: TensorMeta) -> bool:
    """An elementwise node of the full value's shape whose arguments are plain (no lists)."""
    return (_is_elementwise(graph, node) and node.meta is not None
            and tuple(node.meta.shape) == tuple(full.shape) and not node.kwargs
            and not any(isinstance(a, (list, tuple, dict)) for a in node.args))


def _hoist(graph: Graph, users, view: Node) -> list[Node] | None:
    """``view(f(..))`` feeding a reduction: the elementwise producers re-made after the view
    (the last one named as the view, so the reduction reads it unchanged); None if nothing moves."""
    src = view.args[0]
    if not isinstance(src, NodeRef) or view.meta is None:
        return None
    top = graph.node(src.node)
    full = top.meta
    if full is None or not _movable(graph, top, full) or users.get(top.name) != [view.name]:
        return None
    groups = symbolic_groups(full, view.meta)
    if groups is None:
        return None
    mover = _ViewMover(graph, view)
    made: dict[str, NodeRef] = {}

    def is_full(a: object) -> bool:
        meta = graph.node(a.node).meta if isinstance(a, NodeRef) else None
        return meta is not None and tuple(meta.shape) == tuple(full.shape)

    def remade(name: str, last: bool) -> NodeRef | None:
        """`name` re-made on the reshaped value (None: an operand cannot be reshaped)."""
        node, mark, known = graph.node(name), len(mover.new), set(made)
        args = []
        for k, a in enumerate(node.args):
            ref = viewed(a.node) if is_full(a) else \
                mover.operand(a, full, groups, view.meta, f"{name}_a{k}_as_{view.name}")
            if ref is None and a is not None:
                del mover.new[mark:]  # and what the cache says of the nodes just dropped
                for stale in set(made) - known:
                    del made[stale]
                return None
            args.append(ref)
        return mover.remade(node, tuple(args), view.meta, view.name if last else f"{name}_as_{view.name}")

    def viewed(name: str) -> NodeRef:
        """`name`'s value reshaped: its elementwise node re-made after the view where it moves
        (one reader, within the limit), else the view applied to it."""
        if name not in made:
            node = graph.node(name)
            ref = None
            # one reader: a value the view's sizes are read from (sym_size) has two, and stays
            if len(made) < _MAX_MOVED and _movable(graph, node, full) and len(users.get(name, [])) == 1:
                ref = remade(name, False)
            if ref is None:
                # a reshape: the value may be a non-contiguous view (a slice) where the original
                # viewed the contiguous result of an op (a view of it could not be taken)
                label = f"{name}_as_{view.name}"
                op = _AS_RESHAPE.get(view.op, view.op)
                mover.new.append(Node(label, op, (NodeRef(name),) + tuple(view.args[1:]),
                                      dict(view.kwargs), (TensorMeta(view.meta.shape,
                                                                     view.meta.example_shape,
                                                                     node.meta.dtype),),
                                      **mover.common))
                ref = NodeRef(label)
            made[name] = ref
        return made[name]

    return mover.new if remade(top.name, True) is not None else None


def _sink(graph: Graph, users, view: Node, reduced: Node) -> list[Node] | None:
    """``g(view(reduce(..)), ..)``: the elementwise consumers re-made before the view (the view
    then named as the last of them, whose readers read it unchanged); None if nothing moves."""
    inner = reduced.meta
    if view.meta is None or inner is None:
        return None
    groups = symbolic_groups(view.meta, inner)
    if groups is None:
        return None
    mover = _ViewMover(graph, view)
    last: Node | None = None
    current, ref = view.name, NodeRef(reduced.name)
    for _ in range(_MAX_MOVED):
        if len(users.get(current, [])) != 1 or users[current][0] == "<output>":
            break
        node = graph.node(users[current][0])
        if not _movable(graph, node, view.meta) or \
                sum(isinstance(a, NodeRef) and a.node == current for a in node.args) != 1:
            break
        mark, args = len(mover.new), []
        for k, a in enumerate(node.args):
            mapped = ref if isinstance(a, NodeRef) and a.node == current else \
                mover.operand(a, view.meta, groups, inner, f"{node.name}_a{k}_as_{reduced.name}")
            if mapped is None and a is not None:
                del mover.new[mark:]
                args = None
                break
            args.append(mapped)
        if args is None:
            break
        ref = mover.remade(node, tuple(args), inner, f"{node.name}_before_{view.name}")
        last, current = node, node.name
    if last is None:
        return None
    return mover.new + [Node(last.name, view.op, (ref,) + tuple(view.args[1:]), dict(view.kwargs),
                             last.outputs, line=last.line, module_path=last.module_path,
                             module_type=last.module_type, synthetic=True)]


def _views_through_elementwise(graph: Graph):
    users = graph.users()
    edits: list[GraphEdit] = []
    notes: list[str] = []
    for node in graph.nodes:
        if node.op not in REDUCTION_KINDS or not isinstance(node.args[0], NodeRef):
            continue
        before = graph.node(node.args[0].node)
        if before.op in _RESHAPES and users.get(before.name) == [node.name]:  # this reduction's alone
            hoisted = _hoist(graph, users, before)
            if hoisted:
                edits += _replacing(hoisted, before.name)
                notes.append(f"line {node.line}: the elementwise ops before the reshape feeding "
                             f"{node.name} move after it (its prologue)")
        after = users.get(node.name, [])
        if len(after) == 1 and after[0] != "<output>" and graph.node(after[0]).op in _RESHAPES:
            view = graph.node(after[0])
            sunk = _sink(graph, users, view, node)
            if sunk:
                edits += _replacing(sunk, sunk[-1].name)
                notes.append(f"line {node.line}: the elementwise ops after the reshape of "
                             f"{node.name} move before it (its epilogue)")
    return edits, set(), notes


def _views_between_elementwise(graph: Graph):
    """``g(view(f(..)), ..)`` with f and g elementwise and the view f's only reader: g re-made
    before the view (its other operands regrouped to f's shape), so f and g are one kernel and
    the reshape a view of its output (NetVLAD's normalize, reshape, normalize).  Readers are the
    live ones: an earlier rewrite may have left a reader no output needs (norm_of_normalized's
    second sum of squares)."""
    users = live_users(graph)
    edits: list[GraphEdit] = []
    notes: list[str] = []
    moved: set[str] = set()
    for node in graph.nodes:
        after = users.get(node.name, [])
        if node.name in moved or node.meta is None or not _movable(graph, node, node.meta) \
                or len(after) != 1 or after[0] == "<output>" or graph.node(after[0]).op not in _RESHAPES:
            continue
        view = graph.node(after[0])
        sunk = _sink(graph, users, view, node)
        if sunk:
            moved |= {n.name for n in sunk}
            edits += _replacing(sunk, sunk[-1].name)
            notes.append(f"line {view.line}: the elementwise ops after the reshape of {node.name} move "
                         "before it: one kernel on both sides of the reshape")
    return edits, set(), notes
