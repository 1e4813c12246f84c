"""Column kernels: softmax kinds along a strided dim.  Short R (ks_plan_reduction's
KS_PATH_COLREG: R <= KS_COLREG_MAX_R, inner >= 32): a thread per column holding its values in
registers (cuda/reduction/colreg.cu).  Otherwise (KS_PATH_COLS) thread-block clusters first
(cluster_cols.py: sm_90+, 16-byte operands, R within 8 CTAs), then a block per [R, 16] tile kept
in shared memory (cuda/reduction/cols.cu).  Each reads the input once and writes once, where the
tile path reads it twice."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.cluster_cols import (
    cluster_kernel,
    cluster_launch,
    cluster_shape,
)
from kernelstitch.agents.coder.codegen.reduction.context import (
    COLS_CACHE,
    COLUMN_TILE_KINDS,
    Cache,
    Reduction,
    ReductionVariant,
    cached_normalize,
    cached_stats,
    full_or_described_loads,
    loads,
)
from kernelstitch.agents.coder.codegen.templates import render


def kernel(r: Reduction, variant: ReductionVariant) -> str:
    """The cluster kernel (when `variant.cluster`), the shared-memory column tiles and the
    register columns of short R; "" for kinds without them (COLUMN_TILE_KINDS: softmax kinds, no
    affine weight/bias to apply)."""
    if r.kind not in COLUMN_TILE_KINDS:
        return ""
    text = _softmax_nhwc_kernel(r) + _colreg_kernel(r) + render(
        "reduction/cols.cu", name=r.name, params=r.params, out_t=r.out_t,
        loads1=loads(r.roles.prologue, "1", "idx"), pro_x=r.pro_call("xs[u]"),
        stats=cached_stats(r.kind, COLS_CACHE, r.spec.eps), y=cached_normalize(r.kind, COLS_CACHE.val),
        e_loads=loads(r.roles.epilogue, "1", "idx", "e"), epi=r.epi_call("y", "0"),
    )
    if not variant.cluster:
        return text
    return cluster_kernel(
        r.kind, r.name, r.params, r.out_t, loads=full_or_described_loads(r.roles.prologue, "a"),
        pro_call=r.pro_call("v[j][q]"), e_loads=full_or_described_loads(r.roles.epilogue, "e"),
        epi=r.epi_call("yv[q]", "q"), plain=r.vec == 4 and not r.spec.prologue and not r.spec.epilogue,
        fast_math=variant.cluster_fast_math, min_blocks=variant.cluster_min_blocks,
    ) + text


# Register columns: thread-private values, so the "all-reduce" is the value itself.
COLREG_CACHE = Cache(
    each=lambda body: f"#pragma unroll\n    for (int r = 0; r < MAXR; ++r) if (r < Ri) {{ {body} }}",
    val="v[r]",
    allreduce=lambda op, x: x,
)


def _softmax_nhwc_kernel(r: Reduction) -> str:
    """Softmax kinds over the channels of a channels-last input (softmax_nhwc.cu): prologue
    operands loaded once a thread at its channel, epilogue operands staged once a block."""
    def value(k: int) -> str:
        return f"ks_ld(p{k} + ks_row_base_any(d{k}, row, S))"

    epilogue = list(r.roles.epilogue)
    cache = Cache(each=lambda body: f"for (int c = sub; c < Ci; c += tpp) {{ {body} }}", val="v[c]",
                  allreduce=lambda op, x: f"ks_warp_allreduce<{op}>({x}, tpp)")
    return render(
        "reduction/softmax_nhwc.cu", name=r.name, params=r.params, out_t=r.out_t,
        hoists=" ".join(f"float a{k}[1] = {{{value(k)}}};" for k in r.roles.prologue if k != 0),
        pro_x=r.pro_call("x"),
        epi_stage=" ".join(f"epis[{j} * Ci + t] = {value(k)};" for j, k in enumerate(epilogue)),
        stats=cached_stats(r.kind, cache, r.spec.eps), y=cached_normalize(r.kind, cache.val),
        epi_loads=" ".join(f"float e{k}[1] = {{epis[{j} * Ci + c]}};" for j, k in enumerate(epilogue)),
        epi=r.epi_call("y", "q"),
    )


def _colreg_kernel(r: Reduction) -> str:
    return render(
        "reduction/colreg.cu", name=r.name, params=r.params, out_t=r.out_t,
        loads1=loads(r.roles.prologue, "1", "idx"), pro_x=r.pro_call("v[r]"),
        stats=cached_stats(r.kind, COLREG_CACHE, r.spec.eps), y=cached_normalize(r.kind, COLREG_CACHE.val),
        e_loads=loads(r.roles.epilogue, "1", "idx", "e"), epi=r.epi_call("y", "0"),
    )


def launch(r: Reduction, variant: ReductionVariant) -> str:
    """Launcher code for KS_PATH_COLREG and KS_PATH_COLS plans ("" for kinds without column
    kernels)."""
    if r.kind not in COLUMN_TILE_KINDS:
        return ""
    nhwc = render("reduction/softmax_nhwc_launch.cu", name=r.name, args=r.args, nepi=len(r.roles.epilogue)) + "\n"
    text = (render("reduction/colreg_launch.cu", name=r.name, args=r.args) + "\n"
            + render("reduction/cols_launch.cu", name=r.name, args=r.args))
    if not variant.cluster:
        return nhwc + text
    shape = cluster_shape(r.vec)
    return nhwc + cluster_launch(r.name, r.args, shape, len(r.spec.inputs), variant.cluster_full_loads) + "\n" + text
