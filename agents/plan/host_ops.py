"""The ATen ops the generated forward runs on the host as PyTorch calls: views (memory only, no
kernel), size arithmetic and identity dropout.  The planner never gives them a step; the coder
emits them right before their first use.  Both read this table, so they agree by construction."""

from __future__ import annotations

from kernelstitch.agents.plan.graph import Node

# Memory-only ops the wrapper runs as PyTorch calls (no compute, no kernel of ours).
VIEW_OPS = frozenset({
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
    "aten.permute.default", "aten.transpose.int", "aten.t.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.expand.default",
    "aten.flatten.using_ints", "aten.unflatten.int", "aten.contiguous.default",
    "aten.clone.default", "aten.alias.default", "aten.detach.default", "aten.slice.Tensor",
    "aten.select.int", "aten.narrow.default", "aten.to.dtype", "aten.to.dtype_layout",
    "aten._to_copy.default", "aten.type_as.default", "aten.view_as.default",
    "aten.reshape_as.default", "aten.expand_as.default", "aten.movedim.int",
    "aten.swapaxes.default", "aten.lift_fresh_copy.default", "aten.split.Tensor",
    "aten.chunk.default", "aten.unbind.int", "aten.split_with_sizes.default", "aten.numpy_T.default",
})
SIZE_OPS_PREFIX = ("operator.", "aten.sym_size", "aten.sym_numel", "aten.sym_stride",
                   "torch.sym_", "math.")


def is_host(node: Node) -> bool:
    return (node.op in VIEW_OPS or node.op == "getitem" or node.op.startswith(SIZE_OPS_PREFIX)
            or _is_identity_dropout(node))


def _is_identity_dropout(node: Node) -> bool:
    if node.op not in ("aten.dropout.default", "aten.feature_dropout.default"):
        return False
    p, train = node.arg(1, "p", 0.5), node.arg(2, "train", True)
    return (not train) or p == 0
