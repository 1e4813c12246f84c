"""FLOPs, bytes and a category for one recorded torch call, from its tensor shapes.

Estimates, used for roofline floors: bytes are the distinct input tensors read plus the outputs
written once (what an ideal kernel moves); FLOPs count a multiply-add as 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from kernelstitch.profiler.oplog import OpRecord

GEMM_FUNCS = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "einsum",
              "Tensor.__matmul__", "Tensor.matmul", "Tensor.mm", "Tensor.bmm", "__matmul__"}  # fmt: skip
CONV_FUNCS = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d"}  # fmt: skip
ATTENTION_FUNCS = {"scaled_dot_product_attention"}
REDUCTION_WORDS = ("softmax", "norm", "sum", "mean", "max", "min", "amax", "amin", "var", "std",
                   "logsumexp", "cumsum", "prod", "argmax", "argmin", "topk", "sort")  # fmt: skip
COPY_WORDS = ("contiguous", "clone", "copy", "to", "cat", "stack", "pad", "index", "gather",
              "scatter", "repeat", "flip", "roll")  # fmt: skip

# Kernel-name fragments of GEMM libraries (cuBLAS, CUTLASS, cuBLASLt on Hopper) ...
GEMM_KERNEL_MARKERS = ("gemm", "xmma", "cutlass", "wgmma", "gmma", "hmma", "cublas", "sm90_",
                       "sm80_", "ampere_", "matmul", "dot_kernel", "splitk", "nvjet")  # fmt: skip
# ... and of those that run on tensor cores (cuBLAS 12.x+ on Hopper names them nvjet_*).
TENSOR_CORE_KERNEL_MARKERS = ("xmma", "wgmma", "gmma", "hmma", "tensorop", "s16816", "h16816",
                              "s1688", "h1688", "16x8x16", "bf16gemm", "f16gemm", "sm90_xmma", "nvjet")  # fmt: skip


@dataclass(frozen=True)
class OpCost:
    category: str  # gemm | elementwise | reduction | copy | other
    flops: float
    bytes: float
    dtype: str | None


def _base(func: str) -> str:
    name = func.removeprefix("Tensor.").strip("_")
    return name.rstrip("_")  # in-place variants: add_ -> add


def categorize(func: str) -> str:
    if func in GEMM_FUNCS or func in CONV_FUNCS or func in ATTENTION_FUNCS:
        return "gemm"
    base = _base(func)
    if any(word in base for word in REDUCTION_WORDS):
        return "reduction"
    if base in COPY_WORDS or any(base.startswith(w) for w in ("index", "cat", "copy")):
        return "copy"
    return "elementwise"


def op_cost(op: OpRecord) -> OpCost:
    category = categorize(op.func)
    seen: set[str] = set()
    read = 0
    for t in op.inputs:
        if t.id not in seen:
            seen.add(t.id)
            read += t.nbytes
    written = sum(t.nbytes for t in op.outputs)
    floats = [t.dtype for t in op.inputs if t.dtype in ("fp16", "bf16", "fp32", "fp64")]
    dtype = floats[0] if floats else (op.outputs[0].dtype if op.outputs else None)
    out_numel = sum(prod(t.shape) for t in op.outputs)
    flops = float(out_numel)  # one op per output element: elementwise default
    ins = [t.shape for t in op.inputs]
    if op.func in CONV_FUNCS and len(ins) >= 2:
        flops = 2.0 * out_numel * prod(ins[1][1:])
    elif op.func in ATTENTION_FUNCS and len(ins) >= 2 and len(ins[0]) >= 2:
        q, k = ins[0], ins[1]
        flops = 4.0 * prod(q[:-1]) * k[-2] * q[-1]
    elif category == "gemm" and ins:
        a = ins[1] if op.func in ("addmm", "baddbmm", "addbmm") and len(ins) > 1 else ins[0]
        k = a[-1] if a else 1
        flops = 2.0 * out_numel * k
    elif category == "reduction":
        flops = 5.0 * sum(prod(s) for s in ins[:1])
    return OpCost(category, flops, float(read + written), dtype)


def kernel_is_gemm(name: str) -> bool:
    lowered = name.lower()
    return any(m in lowered for m in GEMM_KERNEL_MARKERS)


def kernel_uses_tensor_cores(name: str) -> bool:
    lowered = name.lower()
    return any(m in lowered for m in TENSOR_CORE_KERNEL_MARKERS)
