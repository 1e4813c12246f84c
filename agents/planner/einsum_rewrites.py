"""Exact rewrites of torch.einsum nodes that shrink the contraction before it is planned
(rewrites.apply_rewrites runs them; contraction.py plans what is left).

* `select_through_einsum`: ``einsum(eq, *ops).select(d, i)`` == ``einsum(eq', *ops')`` where the
  output letter L at d is dropped from eq and every operand holding L is selected at i along
  its own dim of L first (an operand broadcasting L, size 1, at 0).  Each output element is a
  sum over the same terms, so the values are equal; the rows nobody reads are never computed
  (level3/49 Mamba2's ``einsum("bhzc,bchpn->bzhpn", ...)[:, -1]``: a third of the work).
* `zeros_in_contraction`: an operand ``cat([zeros, t], dim)`` (or ``cat([t, zeros], dim)``) whose
  letter L at dim is summed: the zeros' terms add 0 (finite products, as every other term is
  finite or the sum is not; a 0 * inf term torch would sum as NaN is the one difference, and
  the operands here are the user's finite activations), so the operand is t and every other
  operand holding L is sliced to t's range of L.  The concatenation is never written.  Only where
  t has the cat's dtype (no promotion).

Both move a read to another point of the program, so neither runs on a graph that writes into a
tensor (an in-place op or an `.out` overload).
"""

from __future__ import annotations

from kernelstitch.agents.plan.graph import Graph, GraphEdit, Node, NodeRef, TensorMeta, renamed
from kernelstitch.agents.planner.contraction import EINSUM_OP, normalise_equation
from kernelstitch.agents.planner.fusion import live_nodes
from kernelstitch.agents.planner.ops import CAT_OP, FILL_VALUES, mutates

# the fills of zeros (FILL_VALUES' zero fills, and new_zeros)
_ZEROS = frozenset({op for op, value in FILL_VALUES.items() if value == 0.0} | {"aten.new_zeros.default"})


def _einsum_parts(graph: Graph, node: Node) -> tuple[list[str], str, list[NodeRef]] | None:
    equation, operands = node.arg(0, "equation"), node.arg(1, "tensors")
    if node.op != EINSUM_OP or not isinstance(equation, str) or not isinstance(operands, (list, tuple)) \
            or not all(isinstance(r, NodeRef) and graph.node(r.node).meta is not None for r in operands):
        return None
    parsed = normalise_equation(equation, len(operands))
    if isinstance(parsed, str):
        return None
    return parsed[0], parsed[1], list(operands)


def _static(meta: TensorMeta, dim: int) -> int | None:
    size = meta.shape[dim]
    return size if isinstance(size, int) else None


def _dropped(meta: TensorMeta, dim: int) -> TensorMeta:
    return TensorMeta(meta.shape[:dim] + meta.shape[dim + 1:], meta.example_shape[:dim] + meta.example_shape[dim + 1:],
                      meta.dtype)


def _sliced(meta: TensorMeta, dim: int, like: TensorMeta, like_dim: int) -> TensorMeta:
    """meta with its size at dim that of `like` at like_dim."""
    return TensorMeta(meta.shape[:dim] + (like.shape[like_dim],) + meta.shape[dim + 1:],
                      meta.example_shape[:dim] + (like.example_shape[like_dim],) + meta.example_shape[dim + 1:],
                      meta.dtype)


def _full_slice(node: Node) -> bool:
    """x[:] along a dim (export writes `t[:, -1]` as a whole slice of dim 0, then the select)."""
    if node.op != "aten.slice.Tensor" or not isinstance(node.args[0], NodeRef):
        return False
    start, end, step = node.arg(2, "start", None), node.arg(3, "end", None), node.arg(4, "step", 1)
    return start in (None, 0) and (end is None or (isinstance(end, int) and end >= 2**62)) and step == 1


def select_through_einsum(graph: Graph):
    if mutates(graph):  # the selects read where the select was: a write in between would show
        return [], set(), []
    users, live = graph.users(), live_nodes(graph)
    edits: list[GraphEdit] = []
    for sel in graph.nodes:
        if sel.name not in live or sel.op != "aten.select.int" or not isinstance(sel.args[0], NodeRef) \
                or sel.meta is None:
            continue
        reader, einsum = sel, graph.node(sel.args[0].node)
        while _full_slice(einsum) and users.get(einsum.name) == [reader.name]:
            reader, einsum = einsum, graph.node(einsum.args[0].node)
        parts = _einsum_parts(graph, einsum)
        if parts is None or users.get(einsum.name) != [reader.name] or einsum.meta is None:
            continue
        letters, out, operands = parts
        dim, index = sel.args[1], sel.args[2]
        if not isinstance(dim, int) or not isinstance(index, int):
            continue
        dim += len(out) if dim < 0 else 0
        if not 0 <= dim < len(out):
            continue
        letter = out[dim]
        new_ops: list[NodeRef] = []
        for k, (ref, held) in enumerate(zip(operands, letters, strict=True)):
            if letter not in held:
                new_ops.append(ref)
                continue
            meta, pos = graph.node(ref.node).meta, held.index(letter)
            # the operands holding the letter share its size (the same index, negative too),
            # or broadcast it (size 1: every row reads index 0)
            own = index if meta.shape[pos] != 1 or einsum.meta.shape[dim] == 1 else 0
            picked = Node(f"{sel.name}_operand{k}", "aten.select.int", (ref, pos, own), {},
                          (_dropped(meta, pos),), line=sel.line, module_path=sel.module_path, synthetic=True)
            edits.append(GraphEdit(picked, before=sel.name))
            new_ops.append(NodeRef(picked.name))
        equation = ",".join(p.replace(letter, "") for p in letters) + "->" + out.replace(letter, "")
        edits.append(GraphEdit(renamed(sel, op=EINSUM_OP, args=(equation, new_ops), kwargs={}, synthetic=True)))
    notes = [f"{sum(e.node.op == EINSUM_OP for e in edits)} selection(s) of an einsum's output computed "
             "inside it (the unread rows are never summed)"] if edits else []
    return edits, set(), notes


def _zero_part(graph: Graph, cat: Node) -> tuple[NodeRef, int, int | None, int | None] | None:
    """(the non-zero part, cat dim, its range along dim as slice start / end) of a two-part cat
    with zeros; only the zeros' length need be static (the range is [z, end) or [0, -z))."""
    parts = cat.arg(0, "tensors")
    dim = cat.arg(1, "dim", 0)
    if cat.op != CAT_OP or not isinstance(parts, (list, tuple)) or len(parts) != 2 or not isinstance(dim, int) \
            or not all(isinstance(p, NodeRef) and graph.node(p.node).meta is not None for p in parts):
        return None
    dim += cat.meta.rank if dim < 0 else 0
    zeros = [graph.node(p.node).op in _ZEROS for p in parts]
    if zeros.count(True) != 1:
        return None
    kept = zeros.index(False)
    if graph.node(parts[kept].node).meta.dtype != cat.meta.dtype:
        return None  # the cat promoted t's dtype: t itself would mix dtypes in the einsum
    zero_length = _static(graph.node(parts[1 - kept].node).meta, dim)
    if not zero_length:
        return None
    return (parts[kept], dim, zero_length, None) if kept == 1 else (parts[kept], dim, 0, -zero_length)


def zeros_in_contraction(graph: Graph):
    if mutates(graph):  # t is read where the einsum is, not where the cat copied it
        return [], set(), []
    edits: list[GraphEdit] = []
    live = live_nodes(graph)
    for node in graph.nodes:
        parts = _einsum_parts(graph, node) if node.name in live else None
        if parts is None:
            continue
        letters, out, operands = parts
        for k, ref in enumerate(operands):
            cat = graph.node(ref.node)
            found = _zero_part(graph, cat) if cat.meta is not None else None
            if found is None or letters[k][found[1]] in out:
                continue
            kept, dim, start, end = found
            letter, kept_meta = letters[k][dim], graph.node(kept.node).meta
            new_ops, added = list(operands), []
            new_ops[k] = kept
            for j, (other, held) in enumerate(zip(operands, letters, strict=True)):
                if j == k or letter not in held:
                    continue
                meta, pos = graph.node(other.node).meta, held.index(letter)
                if _static(meta, pos) == 1:
                    continue  # broadcast along L: every term reads its one value
                cut = Node(f"{node.name}_operand{j}_range", "aten.slice.Tensor", (other, pos, start, end, 1), {},
                           (_sliced(meta, pos, kept_meta, dim),), line=node.line, module_path=node.module_path,
                           synthetic=True)
                added.append(GraphEdit(cut, before=node.name))
                new_ops[j] = NodeRef(cut.name)
            edits += added
            edits.append(GraphEdit(renamed(node, args=(node.args[0], new_ops), kwargs={}, synthetic=True)))
            break  # one concatenation an einsum a pass
    notes = [f"{sum(e.node.op == EINSUM_OP for e in edits)} einsum operand(s) concatenated with zeros along "
             "a summed index read without them (zero terms add nothing)"] if edits else []
    return edits, set(), notes
