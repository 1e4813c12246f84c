"""Greedy fusion over the graph, like Inductor's scheduler: walk the program in order and let
each node join the group of a producer when the result is still one kernel.

* elementwise groups: maximal chains/DAGs of elementwise + broadcast ops of one output dtype;
  every value read outside the group becomes an extra output (materialised once);
* reduction groups: an elementwise producer group whose only consumer is the reduction becomes
  its prologue, elementwise consumers of the result its epilogue;
* pool groups: the same around a max / avg / adaptive-avg pooling (the prologue runs on every
  value a window reads), and batch_stats groups around training-mode batch_norm's statistics
  (no epilogue: the normalisation is elementwise work for the ops after it);
* GEMM groups: a bias add and a ReLU / tanh-GELU that cuBLASLt's epilogue computes exactly;
* library / fallback nodes are groups of their own; view and size ops belong to no group (the
  wrapper runs them in PyTorch, between kernels).

A merge is refused when it would create a cycle (a value outside the group both depends on the
group and feeds it), which is what keeps the groups schedulable as single kernels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Literal

from kernelstitch.agents.plan.graph import Graph, Node, NodeRef, TensorMeta
from kernelstitch.agents.plan.host_ops import is_host
from kernelstitch.agents.planner.attention_kernel import attention_operands_problem
from kernelstitch.agents.planner.contraction import EINSUM_OP, contraction_roles
from kernelstitch.agents.planner.ops import (
    ARG_REDUCE_KINDS,
    BATCH_STATS_MERGE_OP,
    BATCH_STATS_OP,
    CAT_OP,
    CONV_TAP_MEANS_OP,
    FLOAT_DTYPES,
    GEMM_OPS,
    LIBRARY_OPS,
    NLL_OP,
    POOL_OPS,
    RECURRENT_LIBRARY_OPS,
    REDUCTION_KINDS,
    RELU_ATTENTION_OP,
    SCAN_KINDS,
    SDPA_OP,
    TRIANGLE_KINDS,
    float_tensors,
    masked_float_tensors,
    norm_affine,
    norm_groups,
    pool_params,
    reads_bool,
    reduced_dims,
    translate_elementwise,
)
from kernelstitch.agents.planner.recurrent_kernel import recurrent_problem

GroupKind = Literal["elementwise", "reduction", "pool", "batch_stats", "batch_stats_merge", "scan", "arg_reduce", "triangle", "nll", "conv_taps", "cat", "gemm", "library", "contraction",
                    "attention", "recurrent", "fallback"]
Shape = tuple


@dataclass
class Group:
    id: int
    kind: GroupKind
    nodes: list[str]
    anchor: str | None = None  # the reduction / GEMM / library / fallback node
    prologue: list[str] = field(default_factory=list)
    epilogue: list[str] = field(default_factory=list)
    gemm_bias: str | None = None  # bias value fused through a following add
    gemm_activation: str = "none"
    reason: str = ""  # why a fallback node could not be compiled
    outputs: list[str] = field(default_factory=list)  # values read outside the group

    @property
    def final(self) -> str:
        if self.epilogue:
            return self.epilogue[-1]
        return self.anchor if self.anchor else self.nodes[-1]


@dataclass
class Schedule:
    graph: Graph
    groups: list[Group]  # in execution order
    live: set[str]


def broadcast(a: Shape, b: Shape) -> Shape | None:
    """torch broadcasting on (possibly symbolic) shapes; None when not provably compatible."""
    out = []
    for k in range(1, max(len(a), len(b)) + 1):
        x = a[-k] if k <= len(a) else 1
        y = b[-k] if k <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))


def live_nodes(graph: Graph) -> set[str]:
    """Nodes the outputs depend on (dead code is never scheduled)."""
    live: set[str] = set()
    stack = graph.output_names()
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        stack.extend(graph.node(name).refs())
    return live


def live_users(graph: Graph, live: set[str] | None = None) -> dict[str, list[str]]:
    """`graph.users()` with only live readers (and `<output>`): a rewrite may leave a reader no
    output needs (a max.dim beside the amax that replaced its values, a sum a rule made unused)."""
    live = live_nodes(graph) if live is None else live
    return {k: [u for u in v if u == "<output>" or u in live] for k, v in graph.users().items()}


class _Scheduler:
    def __init__(self, graph: Graph, gemm_kernels: bool, cat_kernels: bool = True,
                 attention_kernels: bool = True, recurrent_kernels: bool = False,
                 contraction_kernels: bool = True):
        self.graph = graph
        self.contraction_kernels = contraction_kernels
        self.recurrent_kernels = recurrent_kernels
        self.gemm_kernels = gemm_kernels
        self.cat_kernels = cat_kernels
        self.attention_kernels = attention_kernels
        self.live = live_nodes(graph)
        self.order = {n.name: k for k, n in enumerate(graph.nodes)}
        self.users = live_users(graph, self.live)
        self.ancestors: dict[str, set[str]] = {}
        for n in graph.nodes:
            anc: set[str] = set()
            for r in n.refs():
                anc.add(r)
                anc |= self.ancestors[r]
            self.ancestors[n.name] = anc
        self.groups: list[Group] = []
        self._group_ids = itertools.count()  # never reused: absorb() removes groups
        self.group_of: dict[str, Group] = {}
        self.fallback_reasons: dict[str, str] = {}

    # ---- helpers -------------------------------------------------------------------------
    def meta(self, name: str) -> TensorMeta | None:
        return self.graph.node(name).meta

    def shape(self, name: str) -> Shape:
        m = self.meta(name)
        return tuple(m.shape) if m else ()

    def creates_cycle(self, members: set[str]) -> bool:
        for u in members:
            for r in self.graph.node(u).refs():
                if r not in members and self.ancestors[r] & members:
                    return True
        return False

    def users_within(self, name: str, allowed: set[str]) -> bool:
        return all(u in allowed for u in self.users.get(name, []))

    def new_group(self, kind: GroupKind, nodes: list[str], anchor: str | None = None) -> Group:
        g = Group(next(self._group_ids), kind, list(nodes), anchor)
        self.groups.append(g)
        for n in nodes:
            self.group_of[n] = g
        return g

    def absorb(self, target: Group, victim: Group) -> None:
        for n in victim.nodes:
            self.group_of[n] = target
        self.groups.remove(victim)

    # ---- classification --------------------------------------------------------------------
    def classify(self, node: Node) -> str:
        if is_host(node):
            return "host"
        if node.op in REDUCTION_KINDS:
            return self.compiled_or_fallback(node, "reduction", self.reduction_problem(node))
        if node.op in SCAN_KINDS:
            return self.compiled_or_fallback(node, "scan", self.scan_problem(node))
        if node.op == NLL_OP:  # made only where the kernel takes it (rewrites._cross_entropy)
            return "nll"
        if node.op == CONV_TAP_MEANS_OP:  # made only where the kernel takes it (rewrites._conv_spatial_mean)
            return "conv_taps"
        if node.op == BATCH_STATS_MERGE_OP:  # made only where the kernel takes it (rewrites._batch_stats_of_cat)
            return "batch_stats_merge"
        if node.op in TRIANGLE_KINDS:
            return self.compiled_or_fallback(node, "triangle", self.triangle_problem(node))
        if node.op in ARG_REDUCE_KINDS:
            return self.compiled_or_fallback(node, "arg_reduce", self.arg_reduce_problem(node))
        if node.op == CAT_OP:
            problem = self.cat_problem(node) if self.cat_kernels else "cat left to PyTorch (variant)"
            return self.compiled_or_fallback(node, "cat", problem)
        if node.op == BATCH_STATS_OP:
            return self.compiled_or_fallback(node, "batch_stats", self.operand_problem(node, "normalised value"))
        if node.op in POOL_OPS:
            return self.compiled_or_fallback(node, "pool", self.pool_problem(node))
        if node.op == EINSUM_OP:
            roles = contraction_roles(self.graph, node) if self.contraction_kernels else "einsum left to PyTorch (variant)"
            return self.compiled_or_fallback(node, "contraction", roles if isinstance(roles, str) else None)
        if node.op in GEMM_OPS:
            reason = self.gemm_problem(node)
            if reason is None:
                return "gemm" if self.gemm_kernels else "library"
            return "library"
        if node.op == SDPA_OP and self.attention_kernels and self.attention_problem(node) is None:
            return "attention"
        if node.op == RELU_ATTENTION_OP:  # made only where the kernel takes it (planner/attention.py)
            return self.compiled_or_fallback(node, "attention", self.attention_problem(node))
        if node.op in RECURRENT_LIBRARY_OPS and self.recurrent_kernels and recurrent_problem(self.graph, node) is None:
            return "recurrent"
        if node.op in LIBRARY_OPS:
            return "library"
        if translate_elementwise(node) is not None:
            floating = masked_float_tensors(self.graph, node)
            return self.compiled_or_fallback(node, "elementwise", None if floating else "non-floating-point tensors")
        self.fallback_reasons[node.name] = f"no built-in kernel for {node.op}"
        return "fallback"

    def attention_problem(self, node: Node) -> str | None:
        """Why our flash-attention kernel cannot run this attention node (an SDPA call then stays
        a library call); None when it can."""
        refs = node.args[:3]
        if len(refs) < 3 or not all(isinstance(r, NodeRef) for r in refs):
            return "query, key and value are not all tensors"
        if float(node.arg(4, "dropout_p", 0.0) or 0.0) != 0.0 or node.arg(7, "enable_gqa", False):
            return "dropout or grouped-query attention"
        mask = node.arg(3, "attn_mask", None)
        if mask is not None and (not isinstance(mask, NodeRef) or self.meta(mask.node) is None
                                 or node.arg(5, "is_causal", False)):
            return "a mask that is not a tensor, or a mask with is_causal"
        return attention_operands_problem(*(self.meta(r.node) for r in refs),
                                          self.meta(mask.node) if mask is not None else None)

    def compiled_or_fallback(self, node: Node, kind: str, reason: str | None) -> str:
        """`kind` when nothing stops our kernel (`reason` None), else a fallback with the reason."""
        if reason is None:
            return kind
        self.fallback_reasons[node.name] = reason
        return "fallback"

    def operand_problem(self, node: Node, what: str) -> str | None:
        """Why a kernel of ours cannot read the node's tensors (the first one is `what`)."""
        if not float_tensors(self.graph, node):
            return "non-floating-point tensors"
        if not isinstance(node.args[0], NodeRef):
            return f"{what} is not a tensor"
        return None

    def reduction_problem(self, node: Node) -> str | None:
        problem = self.operand_problem(node, "reduced value")
        if problem:
            return problem
        kind = REDUCTION_KINDS[node.op]
        if kind == "layer_norm":
            shape = node.arg(1, "normalized_shape")
            if not isinstance(shape, list) or not shape:
                return "layer_norm without a static normalized_shape"
        if kind in ("layer_norm", "group_norm"):
            for key, v in zip(("weight", "bias"), norm_affine(node)):
                if v is not None and not isinstance(v, NodeRef):
                    return f"{node.op.split('.')[1]} {key} is not a tensor"
        if kind == "group_norm":
            return self.group_norm_problem(node)
        if kind == "layer_norm":
            return None
        if kind in ("softmax", "log_softmax"):
            dim = node.arg(1, "dim")
            if not isinstance(dim, int):
                return "softmax dim is not an int"
            if node.op.endswith("int.") or node.kwargs.get("dtype") is not None:
                return None  # out dtype from meta
            return None
        dims = node.arg(1, "dim")
        if reduced_dims(dims, len(self.shape(node.args[0].node))) is None:
            return "reduction over dimensions that are not consecutive (one [outer, R, inner] view)"
        if node.kwargs.get("dtype") is not None or (kind in ("sum", "mean") and
                                                    node.arg(3, "dtype") is not None):
            return "reduction with a dtype argument"
        return None

    def cat_problem(self, node: Node) -> str | None:
        tensors = node.arg(0, "tensors")
        if not isinstance(tensors, (list, tuple)) or not tensors or not all(isinstance(t, NodeRef) for t in tensors):
            return "cat of values that are not all tensors"
        if len({t.node for t in tensors}) != len(tensors):
            return "cat reading one tensor twice"
        if not isinstance(node.arg(1, "dim", 0), int):
            return "cat dim is not an int"
        metas = [self.meta(t.node) for t in tensors]
        if any(m is None or m.rank == 0 or m.dtype != node.meta.dtype for m in metas) or not float_tensors(self.graph, node):
            return "cat of tensors of several dtypes, 0-d or not floating point"
        return None

    def scan_problem(self, node: Node) -> str | None:
        problem = self.operand_problem(node, "scanned value")
        if problem:
            return problem
        if not isinstance(node.arg(1, "dim"), int):
            return "scan dim is not an int"
        dtype = node.kwargs.get("dtype")
        if dtype is not None and str(dtype).replace("torch.", "") != node.meta.dtype:
            return "scan with a dtype argument"
        return None

    def triangle_problem(self, node: Node) -> str | None:
        problem = self.operand_problem(node, "masked value")
        if problem:
            return problem
        if len(self.shape(node.args[0].node)) < 2:
            return "triu / tril of a tensor with fewer than 2 dims"
        if not isinstance(node.arg(1, "diagonal", 0), int):
            return "triu / tril diagonal is not an int"
        return None

    def arg_reduce_problem(self, node: Node) -> str | None:
        src = node.args[0]
        if not isinstance(src, NodeRef):
            return "compared value is not a tensor"
        meta = self.meta(src.node)
        if meta is None or meta.dtype not in FLOAT_DTYPES or not node.outputs \
                or node.outputs[0].dtype != "int64":
            return "arg-reduce of a non-floating-point tensor"
        dim = node.arg(1, "dim")
        if dim is not None and not isinstance(dim, int):
            return "arg-reduce dim is not an int"
        return None

    def group_norm_problem(self, node: Node) -> str | None:
        shape = self.shape(node.args[0].node)
        if len(shape) < 2 or not isinstance(shape[1], int):
            return "normalisation of a tensor without a static channel dim"
        if node.op == "aten.instance_norm.default":
            if not node.arg(5, "use_input_stats", True):
                return "instance_norm with running statistics (use_input_stats=False)"
            if any(node.arg(k, key) is not None for k, key in ((3, "running_mean"), (4, "running_var"))):
                return "instance_norm that updates running statistics"
        groups = norm_groups(node, shape[1])
        if not isinstance(groups, int) or groups < 1 or shape[1] % groups:
            return f"group_norm with {groups!r} groups of {shape[1]} channels"
        return None

    def pool_problem(self, node: Node) -> str | None:
        problem = self.operand_problem(node, "pooled value")
        if problem:
            return problem
        shape = self.shape(node.args[0].node)
        params = pool_params(node, len(shape))
        return params if isinstance(params, str) else None

    def affine_refs(self, node: Node) -> set[str]:
        """The weight / bias values of a normalisation, the running statistics of a batch_norm
        statistics node (read by its kernel, not a prologue)."""
        if node.op == BATCH_STATS_OP:
            return {v.node for v in node.args[1:3] if isinstance(v, NodeRef)}
        return {v.node for v in norm_affine(node) if isinstance(v, NodeRef)}

    def gemm_problem(self, node: Node) -> str | None:
        if not float_tensors(self.graph, node):
            return "non-floating-point tensors"
        if node.op == "aten.addmm.default":
            bias, x, w = node.args[0], node.args[1], node.args[2]
            if node.arg(3, "beta", 1) != 1 or node.arg(4, "alpha", 1) != 1:
                return "addmm with alpha/beta"
            if not isinstance(bias, NodeRef) or len(self.shape(bias.node)) != 1:
                return "addmm bias is not 1-d"
        else:
            x, w = node.args[0], node.args[1]
        if not isinstance(x, NodeRef) or not isinstance(w, NodeRef):
            return "operands are not tensors"
        if len(self.shape(w.node)) != 2 or len(self.shape(x.node)) < 1:
            return "weight is not a matrix (batched matmul goes to the library)"
        if self.meta(x.node).dtype != self.meta(w.node).dtype:
            return "mixed dtypes"
        return None

    # ---- placement ---------------------------------------------------------------------------
    def run(self) -> Schedule:
        for node in self.graph.nodes:
            if node.is_placeholder or node.name not in self.live:
                continue
            kind = self.classify(node)
            if kind == "host":
                continue
            if kind == "elementwise":
                self.place_elementwise(node)
            elif kind in ("reduction", "pool", "batch_stats", "scan", "arg_reduce", "triangle"):
                self.place_reduction(node, kind)
            elif kind == "cat":
                self.place_cat(node)
            elif kind == "gemm":
                self.new_group("gemm", [node.name], node.name)
            elif kind == "attention":
                self.place_attention(node)
            else:
                g = self.new_group(kind, [node.name], node.name)
                g.reason = self.fallback_reasons.get(node.name, "")
        self.finish()
        return Schedule(self.graph, self.ordered(), self.live)

    def place_attention(self, node: Node) -> None:
        """An attention group; a mask made as `x != 0` for it alone (attention.py's negation of a
        `masked_fill(x == 0, -inf)`, a comparison left to PyTorch) joins it: the kernel reads x
        and tests it itself."""
        members = [node.name]
        mask = node.arg(3, "attn_mask", None)
        made = self.graph.node(mask.node) if isinstance(mask, NodeRef) else None
        if made is not None and made.op == "aten.ne.Scalar" and len(made.args) == 2 and made.args[1] == 0 \
                and isinstance(made.args[0], NodeRef) and self.users.get(made.name) == [node.name]:
            source = self.meta(made.args[0].node)
            g = self.group_of.get(made.name)
            if source is not None and source.dtype in FLOAT_DTYPES | {"bool"} and g is not None \
                    and g.kind == "fallback" and g.nodes == [made.name]:
                self.groups.remove(g)
                members.insert(0, made.name)
        self.new_group("attention", members, node.name)

    def place_elementwise(self, node: Node) -> None:
        producers: list[Group] = []
        for r in node.refs():
            g = self.group_of.get(r)
            if g is not None and g not in producers:
                producers.append(g)
        for g in producers:
            if g.kind in ("reduction", "pool") and self.can_epilogue(g, node):
                g.epilogue.append(node.name)
                g.nodes.append(node.name)
                self.group_of[node.name] = g
                return
            if g.kind == "gemm" and self.try_gemm_epilogue(g, node):
                return
        ew = [g for g in producers if g.kind == "elementwise" and self.ew_compatible(g, node)]
        for choice in ([ew] if len(ew) > 1 else []) + [[g] for g in reversed(ew)]:
            members = {node.name}.union(*(set(g.nodes) for g in choice))
            if self.creates_cycle(members) or not self.shapes_ok(members, node):
                continue
            target = choice[0]
            for other in choice[1:]:
                target.nodes += other.nodes
                self.absorb(target, other)
            target.nodes.append(node.name)
            target.nodes.sort(key=self.order.__getitem__)
            self.group_of[node.name] = target
            return
        self.new_group("elementwise", [node.name])

    def ew_compatible(self, g: Group, node: Node) -> bool:
        return self.meta(g.nodes[0]).dtype == node.meta.dtype

    def shapes_ok(self, members: set[str], node: Node) -> bool:
        """The new node must span the group's iteration space; smaller members must stay
        internal (a stored output has the full shape)."""
        full = self.shape(node.name)
        for m in members:
            s = self.shape(m)
            if broadcast(s, full) != full:
                return False
            if s != full and not self.users_within(m, members):
                return False
        return True

    def can_epilogue(self, g: Group, node: Node) -> bool:
        final = g.final
        refs = node.refs()
        if final not in refs or reads_bool(self.graph, [node.name], set(g.nodes)):
            return False  # masks are read by the elementwise and scan kernels only
        members = set(g.nodes) | {node.name}
        if any(not self.users_within(m, members) for m in g.nodes):
            return False
        out_shape = self.shape(final)
        if self.shape(node.name) != out_shape or node.meta.dtype not in FLOAT_DTYPES:
            return False
        anchor = self.graph.node(g.anchor)
        forbidden = set(self.prologue_inputs(g)) | self.affine_refs(anchor)
        for r in refs:
            if r == final:
                continue
            if r in g.nodes or r in forbidden or self.ancestors[r] & set(g.nodes):
                return False
            if self.computed_from(r, forbidden, node.name):
                return False
            if broadcast(self.shape(r), out_shape) != out_shape:
                return False
        return True

    def computed_from(self, name: str, tensors: set[str], consumer: str) -> bool:
        """`name` exists only for `consumer` and is made by an elementwise group that reads one of
        `tensors` (a reduction's prologue inputs).  Such an operand cannot join the reduction's
        epilogue, which reads nothing of its prologue's, so as an epilogue operand it would stay a
        kernel of its own: a conv's bias add recomputed for a later reduction (level2/92's
        residual add after group_norm) then made the planner keep the bias in cuDNN's own extra
        pass.  Left out of the epilogue, the consumer joins that group, or the later reduction's
        prologue.  An operand stored for other readers anyway is left to the epilogue (refusing
        it would cost one more full-size write: the reduction's own result)."""
        g = self.group_of.get(name)
        if g is None or g.kind != "elementwise":
            return False
        inside = set(g.nodes)
        if any(u != consumer and u not in inside for u in self.users.get(name, [])):
            return False
        return any(r in tensors for n in g.nodes for r in self.graph.node(n).refs() if r not in inside)

    def prologue_inputs(self, g: Group) -> list[str]:
        inside = set(g.prologue)
        found = []
        for n in g.prologue:
            for r in self.graph.node(n).refs():
                if r not in inside and r not in found:
                    found.append(r)
        if not g.prologue:
            src = self.graph.node(g.anchor).args[0]
            found.append(src.node)
        return found

    def try_gemm_epilogue(self, g: Group, node: Node) -> bool:
        final = g.final
        if g.gemm_activation != "none" or self.users.get(final, []) != [node.name]:
            return False
        anchor = self.graph.node(g.anchor)
        has_bias = g.gemm_bias is not None or (
            anchor.op == "aten.addmm.default" or
            (anchor.op == "aten.linear.default" and anchor.arg(2, "bias") is not None))
        out_shape = self.shape(final)
        if node.op == "aten.add.Tensor" and not has_bias and node.arg(2, "alpha", 1) == 1:
            others = [a for a in node.args[:2] if not (isinstance(a, NodeRef) and a.node == final)]
            if len(others) != 1 or not isinstance(others[0], NodeRef):
                return False
            b = others[0].node
            b_shape = self.shape(b)
            if (len(b_shape) != 1 or not out_shape or b_shape[0] != out_shape[-1]
                    or self.meta(b).dtype != node.meta.dtype or self.ancestors[b] & set(g.nodes)):
                return False
            g.gemm_bias = b
        elif node.op == "aten.relu.default":
            g.gemm_activation = "relu"
        elif node.op == "aten.gelu.default" and node.arg(1, "approximate", "none") == "tanh":
            g.gemm_activation = "gelu_tanh"  # cuBLASLt's GELU epilogue is the tanh form
        else:
            return False
        g.epilogue.append(node.name)
        g.nodes.append(node.name)
        self.group_of[node.name] = g
        return True

    def place_reduction(self, node: Node, kind: GroupKind = "reduction") -> None:
        """A reduction (or pooling: `kind`) node, with its elementwise producer as prologue."""
        src = node.args[0].node
        g = self.group_of.get(src)
        if g is not None and g.kind == "elementwise" and g.nodes[-1] == src:
            members = set(g.nodes) | {node.name}
            affine = self.affine_refs(node)
            full = self.shape(src)
            inputs = self._external_inputs(g.nodes)
            if (all(self.users_within(m, members) for m in g.nodes)
                    and (kind in ("scan", "arg_reduce", "triangle") or not reads_bool(self.graph, g.nodes, set(g.nodes)))
                    and self.users.get(src, []) == [node.name]
                    and any(self.shape(i) == full for i in inputs)
                    and not (affine & set(inputs))
                    and not self.creates_cycle(members)):
                g.kind = kind
                g.prologue = list(g.nodes)
                g.nodes.append(node.name)
                g.anchor = node.name
                self.group_of[node.name] = g
                return
        self.new_group(kind, [node.name], node.name)

    def place_cat(self, node: Node) -> None:
        """A cat node, with the elementwise group that produced each of its inputs when nothing
        else reads that group's values (the segment is then computed where it is stored)."""
        g = self.new_group("cat", [node.name], node.name)
        # what each segment reads: its input itself, or the inputs of the chain it computes; no
        # tensor may be read by two segments (each input is described against its segment's shape)
        reads = {ref.node: {ref.node} for ref in node.arg(0, "tensors")}
        for ref in node.arg(0, "tensors"):
            producer = self.group_of.get(ref.node)
            if producer is None or producer.kind != "elementwise" or producer.nodes[-1] != ref.node:
                continue
            members = set(g.nodes) | set(producer.nodes)
            chain_reads = set(self._external_inputs(producer.nodes))
            others = set().union(*(r for k, r in reads.items() if k != ref.node))
            if (all(self.users_within(m, members) for m in producer.nodes)
                    and not chain_reads & others and not self.creates_cycle(members)):
                g.prologue.extend(producer.nodes)
                g.nodes[:0] = producer.nodes
                self.absorb(g, producer)
                reads[ref.node] = chain_reads

    def _external_inputs(self, nodes: list[str]) -> list[str]:
        inside = set(nodes)
        found: list[str] = []
        for n in nodes:
            for r in self.graph.node(n).refs():
                if r not in inside and r not in found:
                    found.append(r)
        return found

    # ---- outputs and order -----------------------------------------------------------------
    def finish(self) -> None:
        for g in self.groups:
            inside = set(g.nodes)
            g.outputs = [n for n in g.nodes
                         if any(u == "<output>" or u not in inside for u in self.users.get(n, []))]

    def ordered(self) -> list[Group]:
        deps: dict[int, set[int]] = {}
        for g in self.groups:
            d: set[int] = set()
            for n in g.nodes:
                for a in self.ancestors[n]:
                    other = self.group_of.get(a)
                    if other is not None and other is not g:
                        d.add(other.id)
            deps[g.id] = d
        first = {g.id: min(self.order[n] for n in g.nodes) for g in self.groups}
        done: set[int] = set()
        result: list[Group] = []
        pending = sorted(self.groups, key=lambda g: first[g.id])
        while pending:
            ready = next((g for g in pending if deps[g.id] <= done), None)
            if ready is None:
                raise RuntimeError("fusion produced a cyclic schedule (scheduler bug)")
            pending.remove(ready)
            done.add(ready.id)
            result.append(ready)
        return result


def schedule(graph: Graph, gemm_kernels: bool = True, cat_kernels: bool = True,
             attention_kernels: bool = True, recurrent_kernels: bool = False,
             contraction_kernels: bool = True) -> Schedule:
    """Group the graph's live nodes into kernels (see the module docstring)."""
    return _Scheduler(graph, gemm_kernels, cat_kernels, attention_kernels, recurrent_kernels,
                      contraction_kernels).run()
