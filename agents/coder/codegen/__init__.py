"""Kernel emitters of the built-in fusion compiler: kernel specs (agents/plan/kernel_spec.py) in,
CUDA C++ out.

Each emitter returns a `KernelSource`; `build_extension_sources` assembles any number of them into
the sources of one `torch.utils.cpp_extension.load_inline` call (pass `EXTRA_CUDA_CFLAGS`,
`EXTRA_CFLAGS` and `EXTRA_LDFLAGS` too).  Emitting needs no torch.

The CUDA and C++ are files under cuda/ (headers at the top, one folder per emitter), filled by
`templates.render`; the Python modules decide what fills them: `elementwise.py`, `reduction/`
(one module per kernel family), `cluster_cols.py`, `gemm.py`, `pool.py`, `batch_stats.py`, `attention.py`,
`contraction.py` (torch.einsum), and `expr.py` (op lists -> fp32 CUDA statements).
"""

from kernelstitch.agents.coder.codegen.arg_reduce import emit_arg_reduce
from kernelstitch.agents.coder.codegen.attention import emit_attention
from kernelstitch.agents.coder.codegen.batch_stats import emit_batch_stats, emit_batch_stats_merge
from kernelstitch.agents.coder.codegen.cat import emit_cat
from kernelstitch.agents.coder.codegen.common import (
    BINDING_PRELUDE,
    CUDA_PRELUDE,
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    build_extension_sources,
    split_extension_kernels,
)
from kernelstitch.agents.coder.codegen.contraction import emit_contraction
from kernelstitch.agents.coder.codegen.conv_epilogue import emit_conv_epilogue
from kernelstitch.agents.coder.codegen.conv_taps import emit_conv_taps
from kernelstitch.agents.coder.codegen.elementwise import emit_elementwise
from kernelstitch.agents.coder.codegen.expr import c_float, compile_ops, op_expression
from kernelstitch.agents.coder.codegen.gemm import emit_gemm
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.nll import emit_nll
from kernelstitch.agents.coder.codegen.pool import emit_pool
from kernelstitch.agents.coder.codegen.recurrent import emit_recurrent
from kernelstitch.agents.coder.codegen.reduction import ReductionVariant, emit_reduction
from kernelstitch.agents.coder.codegen.scan import emit_scan
from kernelstitch.agents.coder.codegen.triangle import emit_triangle
from kernelstitch.agents.plan.kernel_spec import (
    ArgReduceSpec,
    AttentionSpec,
    BatchStatsMergeSpec,
    BatchStatsSpec,
    CatSegment,
    CatSpec,
    ContractionSpec,
    ConvEpilogueSpec,
    ConvTapMeansSpec,
    ElementwiseOp,
    ElementwiseSpec,
    GemmSpec,
    NllLossSpec,
    PoolSpec,
    RecurrentSpec,
    ReductionKnobs,
    ReductionSpec,
    ScanSpec,
    Spec,
    TensorArg,
    TriangleSpec,
)


def emit(spec: Spec, knobs: ReductionKnobs | None = None) -> KernelSource:
    """Dispatches on the spec type; a reduction's `knobs` (the plan's, when the search varies
    them) choose among the emitter's designs."""
    if isinstance(spec, ElementwiseSpec):
        return emit_elementwise(spec)
    if isinstance(spec, ReductionSpec):
        if knobs is None:
            return emit_reduction(spec)
        return emit_reduction(spec, ReductionVariant(
            row_exp="__expf" if knobs.fast_exp else "expf", cluster=knobs.cluster,
            batched_loads=knobs.batched_loads))
    if isinstance(spec, GemmSpec):
        return emit_gemm(spec)
    if isinstance(spec, PoolSpec):
        return emit_pool(spec)
    if isinstance(spec, BatchStatsSpec):
        return emit_batch_stats(spec)
    if isinstance(spec, BatchStatsMergeSpec):
        return emit_batch_stats_merge(spec)
    if isinstance(spec, ScanSpec):
        return emit_scan(spec)
    if isinstance(spec, CatSpec):
        return emit_cat(spec)
    if isinstance(spec, ArgReduceSpec):
        return emit_arg_reduce(spec)
    if isinstance(spec, TriangleSpec):
        return emit_triangle(spec)
    if isinstance(spec, AttentionSpec):
        return emit_attention(spec)
    if isinstance(spec, NllLossSpec):
        return emit_nll(spec)
    if isinstance(spec, ConvTapMeansSpec):
        return emit_conv_taps(spec)
    if isinstance(spec, RecurrentSpec):
        return emit_recurrent(spec)
    if isinstance(spec, ContractionSpec):
        return emit_contraction(spec)
    if isinstance(spec, ConvEpilogueSpec):
        return emit_conv_epilogue(spec)
    raise TypeError(f"no emitter for {type(spec).__name__}")


__all__ = [
    "ArgReduceSpec",
    "AttentionSpec",
    "BatchStatsMergeSpec",
    "BatchStatsSpec",
    "CatSegment",
    "CatSpec",
    "ContractionSpec",
    "BINDING_PRELUDE",
    "CUDA_PRELUDE",
    "EXTRA_CFLAGS",
    "EXTRA_CUDA_CFLAGS",
    "EXTRA_LDFLAGS",
    "ElementwiseOp",
    "ElementwiseSpec",
    "GemmSpec",
    "KernelSource",
    "NllLossSpec",
    "ConvEpilogueSpec",
    "ConvTapMeansSpec",
    "RecurrentSpec",
    "emit_contraction",
    "emit_conv_epilogue",
    "emit_conv_taps",
    "PoolSpec",
    "ReductionSpec",
    "ScanSpec",
    "TensorArg",
    "TriangleSpec",
    "build_extension_sources",
    "split_extension_kernels",
    "c_float",
    "compile_ops",
    "emit",
    "emit_attention",
    "emit_batch_stats",
    "emit_elementwise",
    "emit_gemm",
    "emit_pool",
    "emit_reduction",
    "op_expression",
]
