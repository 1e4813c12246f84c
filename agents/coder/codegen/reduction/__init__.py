"""Reduction emitter: sum, mean, amax, amin, logsumexp, softmax, log_softmax and layer_norm over a
tensor seen as [outer, R, inner], with the elementwise prologue and epilogue fused.

One launcher per spec holds every kernel family; `ks_plan_reduction` (ks_shared_types.h, shared
with the binding) picks the path at run time:

* `row.py`: inner == 1, R <= 16K: the row in registers, a warp or a block per row.
* `colloop.py`: a strided dim with columns enough to fill the GPU: a thread per column walks R.
* `flat.py`: reduce kinds over long rows (inner == 1) the row kernels do not take, full
  reductions to one value above all: chunks of a row per block, 16-byte loads.
* `cols.py`: softmax kinds along a strided dim: registers for short R, thread-block clusters
  (`cluster_cols.py`), else [R, 16] tiles in shared memory.
* `tile.py`: everything else (and every fallback): coalesced along inner, online states, R split
  across blocks when needed, then finalize and (normalising kinds) apply kernels.
* `binding.py`: the host side; `context.py`: what the families share.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.reduction import colloop, cols, flat, row, tile
from kernelstitch.agents.coder.codegen.reduction.binding import binding
from kernelstitch.agents.coder.codegen.reduction.context import (
    COLUMN_TILE_KINDS,
    NORMALIZING,
    ROWS32_KINDS,
    Reduction,
    ReductionVariant,
)
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import ReductionSpec

__all__ = ["COLUMN_TILE_KINDS", "NORMALIZING", "ROWS32_KINDS", "ReductionVariant", "emit_reduction"]


def emit_reduction(spec: ReductionSpec, variant: ReductionVariant = ReductionVariant()) -> KernelSource:
    """`variant`: the microbenchmarks' design knobs (the default is what the coder emits)."""
    r = Reduction.of(spec)
    name = r.name
    launcher_sig = (
        f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, float* workspace, "
        f"int64_t outer, int64_t R, int64_t inner, const KsRedPlan& plan, int vec, cudaStream_t stream)"
    )
    # Column kernels only where inner can exceed 1: over a trailing dim they were never launched
    # and were most of ptxas's time (a row softmax's cols / colloop / colreg / cluster kernels:
    # 77 of 101 s on 2 cores; level2/84's build timed out at 240 s on the H100 machine).
    columns = not spec.trailing
    cuda = render(
        "reduction/kernel.cu", name=name, kind=spec.kind, pro=r.pro.source, epi=r.epi.source,
        row_kernel=row.kernel(r, variant), cols_kernel=cols.kernel(r, variant) if columns else "",
        colloop_kernel=colloop.kernel(r, variant) if columns else "", flat_kernel=flat.kernel(r),
        tile_kernel=tile.kernels(r, variant), apply_kernel=tile.apply_kernel(r), launcher_sig=launcher_sig, out_t=r.out_t,
        row_launch=row.launches(r), cols_launch=cols.launch(r, variant) if columns else "",
        colloop_launch=colloop.launch(r) if columns else "", flat_launch=flat.launch(r),
        tile_launch=tile.launch(r),
    )
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding(r),
        launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            (
                f"{spec.kind}: row kernels keep the row in registers ({r.vec}-wide 16-byte loads when "
                "aligned), warp-per-row up to R=1024, block-per-row up to 16K"
            ),
            (
                "tile kernel for inner > 1 / long rows: coalesced along inner, online states, R split "
                "across blocks when columns cannot fill the SMs"
            ),
            "prologue/epilogue fused; fp32 accumulation (Welford for layer_norm on the tile path)",
        ),
    )
