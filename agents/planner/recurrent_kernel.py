"""Where the persistent recurrent kernel (codegen/recurrent.py) can run a captured recurrent op
(aten.lstm / gru / rnn_tanh / rnn_relu .input), and its spec.

The kernel keeps each block's rows of W_ih and W_hh in shared memory and needs every block of a
launch resident at once; its binding decides the layers a launch from the GPU it runs on and
refuses (a clear error, the variant then dropped by the search) what no launch holds.  The
planner proposes it only where one layer fits an H100 (132 SMs, 227 KB of shared memory a
block) at every batch up to the binding's limit, so a variant is not built for nothing on the usual
GPUs and a delivered program runs the batches its caller gives it.
"""

from __future__ import annotations

from kernelstitch.agents.plan.graph import Graph, Node, NodeRef
from kernelstitch.agents.plan.kernel_spec import (
    RECURRENT_GATES,
    RECURRENT_MAX_BATCH,
    RECURRENT_MAX_BATCH_TILE,
    RecurrentSpec,
    TensorArg,
)

_PLAN_SMS, _PLAN_SMEM_BYTES, _ROWS_A_BLOCK = 132, 227 * 1024, 64  # an H100; the kernel's 8 warps x 8 rows


def cell_of(node: Node) -> str:
    """`lstm` of aten.lstm.input, and so on."""
    return node.op.split(".")[1]


def _arguments(node: Node) -> tuple[NodeRef, list, list, bool, int, float, bool, bool, bool]:
    """aten.<cell>.input's (input, hx list, params, has_biases, layers, dropout, train,
    bidirectional, batch_first); hx a list for every cell (GRU / RNN: [h0])."""
    args = list(node.args)
    hx = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
    return (args[0], list(hx), list(args[2]), bool(args[3]), int(args[4]), float(args[5]), bool(args[6]),
            bool(args[7]), bool(args[8]))


def smem_bytes(cell: str, units: int, widest_input: int, hidden: int, batch: int, tile: int) -> int:
    """The kernel's shared memory a block (cuda/recurrent/kernel.cu: {name}_smem_bytes)."""
    rows_pad = -(-RECURRENT_GATES[cell] * units // 8) * 8
    return 4 * (rows_pad * (widest_input + hidden) + 2 * rows_pad + tile * (widest_input + hidden)
                + 2 * _ROWS_A_BLOCK * tile + units * batch)


def recurrent_problem(graph: Graph, node: Node) -> str | None:
    """Why the recurrent kernel cannot run `node`; None when it can."""
    if len(node.args) != 9:
        return "not the padded-sequence form"
    x, hx, params, has_biases, layers, dropout, train, bidirectional, _ = _arguments(node)
    refs = [x, *hx, *params]
    if not all(isinstance(r, NodeRef) for r in refs):
        return "an input, state or weight is not a tensor"
    metas = [graph.node(r.node).meta for r in refs]
    if any(m is None or m.dtype != "float32" for m in metas):
        return "not all float32"
    if dropout != 0.0 and train:
        return "dropout between layers in training mode"
    cell = cell_of(node)
    dirs = 2 if bidirectional else 1
    if len(params) != layers * dirs * (4 if has_biases else 2):
        return "a projection (proj_size) or an unexpected weight layout"
    xm, hm = metas[0], metas[1]
    if xm.rank != 3 or hm.rank != 3:
        return "an unbatched input"
    if not all(isinstance(d, int) for d in (xm.shape[2], hm.shape[2])):
        return "symbolic feature or hidden sizes"
    # sequence length and batch may be symbolic: the traced ones choose the batch tile
    batch, hidden, features = int(hm.example_shape[1]), int(hm.shape[2]), int(xm.shape[2])
    if batch > RECURRENT_MAX_BATCH:
        return f"batch {batch} over {RECURRENT_MAX_BATCH}"
    widest = max(features, dirs * hidden) if layers > 1 else features
    tile = batch_tile(batch)
    for units in range(1, _ROWS_A_BLOCK // RECURRENT_GATES[cell] + 1):
        # any batch up to the binding's limit, not only the traced one: a delivered program must
        # run the batches its caller gives it (the LSTM's cell state takes units x batch floats)
        if (dirs * -(-hidden // units) <= _PLAN_SMS
                and smem_bytes(cell, units, widest, hidden, RECURRENT_MAX_BATCH, tile) <= _PLAN_SMEM_BYTES):
            return None
    return f"hidden size {hidden} with input {features}: one layer does not fit the GPU at once"


def batch_tile(batch: int) -> int:
    return max(1, min(batch, RECURRENT_MAX_BATCH_TILE))


def recurrent_spec(graph: Graph, node: Node, name: str, tensor_arg) -> tuple[RecurrentSpec, list[str]]:
    """The kernel's spec for `node` and the step's inputs in call order (input, h0[, c0], weights)."""
    x, hx, params, has_biases, layers, _, _, bidirectional, batch_first = _arguments(node)
    cell = cell_of(node)
    hm = graph.node(hx[0].node).meta
    args: list[TensorArg] = [tensor_arg(r.node) for r in (x, *hx, *params)]
    spec = RecurrentSpec(
        name=name, cell=cell, input=args[0], hidden=args[1], layers=layers, directions=2 if bidirectional else 1,
        has_biases=has_biases, batch_first=batch_first, batch_tile=batch_tile(int(hm.example_shape[1])),
        cell_state=args[2] if cell == "lstm" else None, weights=tuple(args[1 + len(hx):]))
    return spec, [r.node for r in (x, *hx, *params)]
