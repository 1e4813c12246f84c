"""Attention written out as ops, read as PyTorch's fused `scaled_dot_product_attention`.

    s = (q @ k.transpose(-2, -1)) * c      (or / d, or no scale; or (q * c) @ k^T)
    s = s.masked_fill(cond, -inf)          (optional)
    p = softmax(s, dim=-1)
    p = dropout(p, 0.0) | eval dropout     (optional, the identity)
    y = p @ v
==  y = scaled_dot_product_attention(q, k, v, attn_mask=~cond, scale=c)

which is SDPA's definition: softmax(q k^T * scale + mask) v with a boolean mask that is True
where a position takes part.  Only the summation order differs (the fused kernels never write
the [L, S] score matrix: flash / memory-efficient / cuDNN backends, chosen by PyTorch for the
dtype, mask and device).  Conditions for the rewrite to be exact: every intermediate has the
one reader shown (nothing else reads the scores or probabilities), q, k and v share their dtype
(fp32 / fp16 / bf16), rank (>= 3) and batch sizes (no matmul broadcasting), softmax is over the
last dim without a dtype change, and the mask broadcasts to the scores.  A row every key of
which is masked is NaN in the written-out form; SDPA's math path gives zeros there, so the
Verifier's comparison decides (random inputs never mask a whole row of a causal mask).

The same pattern with ReLU in place of softmax (``relu(masked scores) @ v``: masked scores are
-inf, so 0) has no library form; it becomes one `RELU_ATTENTION_OP` node only where our
attention kernel takes it, else it stays written out.

`attention_rewrites(graph)` returns the edits (replacing the second matmul with the SDPA node
and the mask with its negation); the built-in planner applies them by default and proposes the
written-out form as a variant the Verifier times against it (agents/planner/variants.py).
"""

from __future__ import annotations

from kernelstitch.agents.plan.graph import Graph, GraphEdit, Node, NodeRef, TensorMeta, renamed
from kernelstitch.agents.planner.attention_kernel import attention_operands_problem
from kernelstitch.agents.planner.fusion import live_nodes
from kernelstitch.agents.planner.ops import RELU_ATTENTION_OP, SDPA_OP

__all__ = ["SDPA_OP", "attention_rewrites", "has_attention"]
_MATMULS = frozenset({"aten.matmul.default", "aten.bmm.default"})
_SOFTMAX = frozenset({"aten.softmax.int", "aten._softmax.default"})
_DROPOUTS = frozenset({"aten.dropout.default"})
_FLOATS = frozenset({"float32", "float16", "bfloat16"})


def _live_users(graph: Graph) -> dict[str, list[str]]:
    """graph.users() without dead readers (nn.MultiheadAttention averages the probabilities
    over heads for its second result, which the caller usually drops)."""
    live = live_nodes(graph)
    return {name: [u for u in readers if u in live or u == "<output>"] for name, readers in graph.users().items()}


def attention_rewrites(graph: Graph, relu: bool = True) -> tuple[list[GraphEdit], list[str]]:
    """Edits turning each written-out attention into one SDPA node (`relu`: its ReLU form into
    one RELU_ATTENTION_OP node where our kernel takes it), and a note for each."""
    users = _live_users(graph)
    edits: list[GraphEdit] = []
    notes: list[str] = []
    for node in graph.nodes:
        found = _match(graph, users, node, relu)
        if found is None:
            continue
        new, note = found
        edits += new
        notes.append(note)
    return edits, notes


def has_attention(graph: Graph) -> bool:
    users = _live_users(graph)
    return any(_match(graph, users, n) is not None for n in graph.nodes)


def _only_reader(users: dict[str, list[str]], name: str, reader: str) -> bool:
    return users.get(name, []) == [reader]


def _ref(graph: Graph, value) -> Node | None:
    return graph.node(value.node) if isinstance(value, NodeRef) else None


def _sole_input(graph: Graph, users: dict[str, list[str]], node: Node) -> Node | None:
    """`node`'s first operand when `node` is its only (live) reader, else None."""
    inner = _ref(graph, node.args[0]) if node.args else None
    return inner if inner is not None and _only_reader(users, inner.name, node.name) else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _match(graph: Graph, users: dict[str, list[str]], out: Node,
           relu: bool = True) -> tuple[list[GraphEdit], str] | None:
    """(edits, note) when `out` is the `p @ v` of a written-out attention, else None."""
    if out.op not in _MATMULS or len(out.args) != 2 or out.kwargs:
        return None
    probs, v = _ref(graph, out.args[0]), _ref(graph, out.args[1])
    if probs is None or v is None or not _only_reader(users, probs.name, out.name):
        return None
    if probs.op in _DROPOUTS:  # the identity: p == 0, or not training
        p, train = probs.arg(1, "p", 0.5), probs.arg(2, "train", True)
        if not (p == 0 or train is False):
            return None
        probs = _sole_input(graph, users, probs)
        if probs is None:
            return None
    score = "relu" if relu and probs.op == "aten.relu.default" else "softmax"
    if score == "softmax" and probs.op not in _SOFTMAX:
        return None
    scores_in = _sole_input(graph, users, probs)
    rank = probs.meta.rank if probs.meta else 0
    if scores_in is None or rank < 3:
        return None
    if score == "softmax":
        dim = probs.arg(1, "dim")
        keeps_dtype = (len(probs.args) < 3 or probs.args[2] in (None, False)) and probs.kwargs.get("dtype") is None
        if dim not in (-1, rank - 1) or not keeps_dtype:
            return None
    mask = None
    scores = scores_in
    if scores.op == "aten.masked_fill.Scalar":
        fill = _number(scores.args[2]) if len(scores.args) > 2 else None
        cond = _ref(graph, scores.args[1])
        if fill is None or fill != float("-inf") or cond is None or cond.meta is None \
                or cond.meta.dtype != "bool" or not _broadcasts(cond.meta.example_shape, scores.meta.example_shape):
            return None
        mask = cond
        scores = _sole_input(graph, users, scores)
        if scores is None:
            return None
    scale = 1.0
    if scores.op in ("aten.mul.Tensor", "aten.div.Tensor", "aten.mul.Scalar", "aten.div.Scalar"):
        factor = _number(scores.args[1]) if len(scores.args) > 1 else None
        inner = _sole_input(graph, users, scores)
        if factor is None or factor == 0 or inner is None:
            return None
        scale = factor if "mul" in scores.op else 1.0 / factor
        scores = inner
    if scores.op not in _MATMULS or len(scores.args) != 2 or scores.kwargs:
        return None
    q, kt = _ref(graph, scores.args[0]), _ref(graph, scores.args[1])
    if q is None or kt is None or not _only_reader(users, kt.name, scores.name):
        return None
    if q.op in ("aten.mul.Tensor", "aten.mul.Scalar") and _only_reader(users, q.name, scores.name):
        factor = _number(q.args[1]) if len(q.args) > 1 else None  # (c q) k^T == c (q k^T)
        unscaled = _ref(graph, q.args[0])
        if factor is not None and unscaled is not None:
            scale, q = scale * factor, unscaled
    k = _transposed_last_two(graph, kt)
    if k is None or not _same_batch(q, k, v):
        return None
    new_mask: list[GraphEdit] = []
    kwargs = {"dropout_p": 0.0, "is_causal": False, "scale": scale}
    if mask is not None:
        negated = _negated(mask, users, scores_in.name)
        new_mask = [GraphEdit(negated, before=out.name)]
        kwargs = {"attn_mask": NodeRef(negated.name), **kwargs}
    what = "masked " if mask is not None else ""
    if score == "relu":  # no library form: only where our kernel runs it (the mask as bool)
        mask_meta = TensorMeta(mask.meta.shape, mask.meta.example_shape, "bool") if mask is not None else None
        if attention_operands_problem(q.meta, k.meta, v.meta, mask_meta) is not None:
            return None
        node = renamed(out, op=RELU_ATTENTION_OP, args=(NodeRef(q.name), NodeRef(k.name), NodeRef(v.name)),
                       kwargs=kwargs, synthetic=True)
        note = (f"line {out.line or '?'}: {what}ReLU attention written out (matmul, scale, relu, matmul) read "
                "as one flash-style kernel: no [L, S] score matrix in memory")
        return new_mask + [GraphEdit(node)], note
    sdpa = renamed(out, op=SDPA_OP, args=(NodeRef(q.name), NodeRef(k.name), NodeRef(v.name)),
                   kwargs=kwargs, synthetic=True)
    note = (f"line {out.line or '?'}: {what}attention written out (matmul, scale, softmax, matmul) read as "
            "scaled_dot_product_attention: PyTorch's fused attention, no [L, S] score matrix in memory")
    return new_mask + [GraphEdit(sdpa)], note


def _transposed_last_two(graph: Graph, kt: Node) -> Node | None:
    """k of `k.transpose(-2, -1)` (any spelling of the last two dims), else None."""
    if kt.op != "aten.transpose.int" or kt.meta is None:
        return None
    rank = kt.meta.rank
    dims = {d % rank for d in kt.args[1:3] if isinstance(d, int)}
    source = _ref(graph, kt.args[0])
    return source if dims == {rank - 2, rank - 1} else None


def _same_batch(q: Node, k: Node, v: Node) -> bool:
    metas = [q.meta, k.meta, v.meta]
    if any(m is None or m.dtype not in _FLOATS for m in metas):
        return False
    mq, mk, mv = metas
    return (mq.dtype == mk.dtype == mv.dtype and mq.rank == mk.rank == mv.rank >= 3
            and mq.shape[:-2] == mk.shape[:-2] == mv.shape[:-2]
            and mq.shape[-1] == mk.shape[-1] and mk.shape[-2] == mv.shape[-2])


def _broadcasts(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big)))


def _negated(cond: Node, users: dict[str, list[str]], reader: str) -> Node:
    """The mask SDPA takes (True: attend): `x != c` for the `x == c` masked_fill read, else
    logical_not(cond)."""
    name = f"{cond.name}_attend"
    if cond.op == "aten.eq.Scalar" and _only_reader(users, cond.name, reader):
        return renamed(cond, name=name, op="aten.ne.Scalar", synthetic=True)
    return Node(name, "aten.logical_not.default", (NodeRef(cond.name),), {}, cond.outputs,
                line=cond.line, module_path=cond.module_path, module_type=cond.module_type,
                synthetic=True)
