"""Which attentions our flash-attention kernel (codegen/attention.py) can run, from the operands'
metadata: the scheduler asks it of scaled_dot_product_attention nodes (the others stay PyTorch's
call), and the attention rewrite of ReLU attention, which has no library form, asks it before
making the node."""

from __future__ import annotations

from kernelstitch.agents.plan.graph import TensorMeta
from kernelstitch.agents.plan.kernel_spec import attention_kernel_problem


def attention_operands_problem(q: TensorMeta | None, k: TensorMeta | None, v: TensorMeta | None,
                               mask: TensorMeta | None) -> str | None:
    """Why the kernel cannot take query / key / value (and a mask tensor) of these shapes and
    dtypes; None when it can.  The kernel is compiled for one head dim, so it must be a static
    size, the same for the three (a symbol the Verifier could vary is refused)."""
    if q is None or k is None or v is None:
        return "unknown query / key / value shapes"
    if not (q.rank == k.rank == v.rank >= 2) or not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return "query, key and value leading dims differ (broadcast)"
    head = q.shape[-1]
    if not isinstance(head, int) or k.shape[-1] != head or v.shape[-1] != head or k.shape[-2] != v.shape[-2]:
        return "head dims differ or are not static"
    return attention_kernel_problem(head, (q.dtype, k.dtype, v.dtype), mask.dtype if mask is not None else None)
