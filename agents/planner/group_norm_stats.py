"""group_norm (and instance_norm with batch statistics) as a statistics kernel and elementwise
ops, where its value is only ever reduced or pooled: level2/92's GroupNorm, Tanh, HardSwish,
residual add, LogSumExp; level2/85's GroupNorm, scale, MaxPool; level2/23's and 27's GroupNorm,
mean.  The group_norm kernel writes its normalized tensor and the reduction after it reads it
back; here the statistics are one pass over the input and the normalization becomes the
reduction's prologue, so the normalized tensor is never stored.

The statistics are batch_norm's kernel in its group form (BatchStatsSpec.groups: mean and
1 / sqrt(biased variance + eps) of each (sample, group), group_norm's definition, reading NCHW or
channels-last input as it lies); the [2, N * G] result is spread to [N, C, 1, ...] per-channel operands (a copy of
N x C values), and `(x - mean) * rstd * weight + bias` is elementwise.  A plan variant
(`gn-stats`): the group_norm kernel family stays the default, the search measures both.
"""

from __future__ import annotations

from kernelstitch.agents.plan.graph import (
    Graph,
    GraphEdit,
    Node,
    NodeRef,
    TensorMeta,
    channel_view,
    renamed,
    synthetic_fields,
)
from kernelstitch.agents.plan.host_ops import is_host
from kernelstitch.agents.planner.fusion import live_users
from kernelstitch.agents.planner.ops import (
    BATCH_STATS_OP,
    POOL_OPS,
    REDUCTION_KINDS,
    norm_affine,
    norm_groups,
    translate_elementwise,
)

# the normalizations this rule takes (instance_norm with batch statistics is a group_norm)
NORMALIZATION_OPS = ("aten.group_norm.default", "aten.instance_norm.default")


def _only_reduced(graph: Graph, users: dict[str, list[str]], name: str) -> bool:
    """Whether every value computed from `name` through elementwise and view ops ends in a
    reduction or pooling (none is an output, a library call's input or a fallback's)."""
    frontier, seen, ends = [name], set(), 0
    while frontier:
        for user in users.get(frontier.pop(), []):
            if user == "<output>":
                return False
            if user in seen:
                continue
            seen.add(user)
            node = graph.node(user)
            if is_host(node) or translate_elementwise(node) is not None:
                frontier.append(user)
            elif node.op in REDUCTION_KINDS or node.op in POOL_OPS:
                ends += 1
            else:
                return False
    return ends > 0


def _product(sizes: tuple) -> str | int:
    """The product of (possibly symbolic) sizes, as a meta's shape entry."""
    if all(isinstance(s, int) for s in sizes):
        total = 1
        for s in sizes:
            total *= s
        return total
    return "*".join(f"({s})" if isinstance(s, str) else str(s) for s in sizes)


def _stats_nodes(graph: Graph, node: Node) -> list[Node] | None:
    """The nodes computing `node` (a group_norm / instance_norm) from batch statistics of its
    groups, the last named as `node`; None where it does not apply."""
    x = node.args[0] if node.args else None
    meta = node.meta
    if not isinstance(x, NodeRef) or meta is None or meta.dtype != "float32" or meta.rank < 2:
        return None
    channels = meta.shape[1]
    groups = norm_groups(node, channels)
    if not isinstance(channels, int) or not isinstance(groups, int) or groups < 1 or channels % groups:
        return None
    if node.op == "aten.instance_norm.default" and (
            not node.arg(5, "use_input_stats", True)
            or any(node.arg(k, key) is not None for k, key in ((3, "running_mean"), (4, "running_var")))):
        return None
    eps = node.arg(4, "eps", 1e-5) if node.op == "aten.group_norm.default" else node.arg(7, "eps", 1e-5)
    weight, bias = norm_affine(node)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0 or any(
            v is not None and (not isinstance(v, NodeRef) or graph.node(v.node).meta is None
                               or graph.node(v.node).meta.shape != (channels,)) for v in (weight, bias)):
        return None
    common = synthetic_fields(node)
    n, ex_n, spatial = meta.shape[0], meta.example_shape[0], meta.rank - 2
    per_group = channels // groups
    rows, ex_rows = _product((n, groups)), ex_n * groups
    new: list[Node] = []

    def op(label: str, aten: str, args: tuple, shape: tuple, example: tuple, kwargs: dict | None = None,
           dtype: str = "float32") -> NodeRef:
        new.append(Node(f"{node.name}_{label}", aten, args, kwargs or {}, (TensorMeta(shape, example, dtype),),
                        **common))
        return NodeRef(new[-1].name)

    # the statistics kernel reads x as it lies (NCHW: a group is one contiguous row; channels-last:
    # per-sample parts of each channel merged per group), so the conv before it may stay NHWC
    stats = op("stats", BATCH_STATS_OP, (x, None, None), (2, rows), (2, ex_rows),
               {"eps": float(eps), "momentum": 0.0, "groups": groups})
    vec_shape, vec_example = (n, channels) + (1,) * spatial, (ex_n, channels) + (1,) * spatial

    def per_channel(row: int, label: str) -> NodeRef:  # [N * G] -> [N, C, 1, ...]
        picked = op(label, "aten.select.int", (stats, 0, row), (rows,), (ex_rows,))
        grid = op(f"{label}_grid", "aten.unflatten.int", (picked, 0, [-1, groups]), (n, groups), (ex_n, groups))
        wide = op(f"{label}_wide", "aten.unsqueeze.default", (grid, -1), (n, groups, 1), (ex_n, groups, 1))
        spread = op(f"{label}_spread", "aten.expand.default", (wide, [-1, -1, per_group]),
                    (n, groups, per_group), (ex_n, groups, per_group))
        return op(f"{label}_channels", "aten.reshape.default", (spread, [-1, channels] + [1] * spatial),
                  vec_shape, vec_example)

    mean, rstd = per_channel(0, "mean"), per_channel(1, "rstd")
    full = (meta.shape, meta.example_shape)
    y = op("normed", "aten.mul.Tensor", (op("centered", "aten.sub.Tensor", (x, mean), *full), rstd), *full)
    for label, value, aten in (("scaled", weight, "aten.mul.Tensor"), ("shifted", bias, "aten.add.Tensor")):
        if value is not None:
            new.append(channel_view(f"{node.name}_{label}_view", value, graph.node(value.node).meta, spatial,
                                    common))
            y = op(label, aten, (y, NodeRef(new[-1].name)), *full)
    new[-1] = renamed(new[-1], name=node.name)  # the last op defines the normalization's value
    return new


def group_norm_as_stats(graph: Graph):
    """The rewrite rule (planner/rewrites.py's protocol): (edits, algebraic node names, notes)."""
    users = live_users(graph)
    edits: list[GraphEdit] = []
    notes: list[str] = []
    for node in graph.nodes:
        if node.op not in NORMALIZATION_OPS or not _only_reduced(graph, users, node.name):
            continue
        new = _stats_nodes(graph, node)
        if new:
            edits += [GraphEdit(k, before=node.name) for k in new[:-1]] + [GraphEdit(new[-1])]
            notes.append(f"line {node.line or '?'}: {node.op.split('.')[1]} as its groups' batch statistics, "
                         "then (x - mean) * rstd * weight + bias in the reduction that reads it: the "
                         "normalized tensor is never stored")
    return edits, set(), notes
