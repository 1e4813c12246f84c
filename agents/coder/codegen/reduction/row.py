"""Row kernels (inner == 1, R <= KS_ROW_CAP): the row is loaded once into registers with 16-byte
vector loads (a warp per row up to R = 1024, a block per row beyond), reduced with warp shuffles
(+ shared memory across warps), and for softmax / log_softmax / layer_norm written back from the
registers: one read and one write of memory.  Softmax stats are max then sum of exp from the
cached values; layer_norm is two-pass over the cached values (mean, then squared deviations).

One kernel template (cuda/reduction/row.cu) instantiated per (vector width, values per thread,
warp or block, register cap); `launches` lists the instantiations the host plan can pick."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import BLOCK_SCALAR_VALUES
from kernelstitch.agents.coder.codegen.reduction.context import (
    ROW_OP,
    ROWS32_KINDS,
    Reduction,
    ReductionVariant,
    cached_normalize,
    cached_stats,
    row_any_layout,
    row_cache,
    row_loads,
)
from kernelstitch.agents.coder.codegen.templates import render

# Cached slot j of this thread holds real columns of a real row (a lane group past the last row
# recomputes it, to keep its warp's shuffles converged, and stores nothing).
VALID = "(row_ok && (j * TX + tx) * VEC < Ri)"


def kernel(r: Reduction, variant: ReductionVariant) -> str:
    any_layout = row_any_layout(r.kind)
    base = "ks_row_base_any" if any_layout else "ks_row_base"
    x_load = ("ks_load_row_any<VEC>(p0, d0, b0, row * R, col, v[j]);" if any_layout
              else "ks_load_row<VEC>(p0, d0, b0, col, v[j]);")
    return render(
        "reduction/row.cu", name=r.name, params=r.params, out_t=r.out_t,
        bases=" ".join(f"const int64_t b{k} = {base}(d{k}, row, R);" for k in r.row_operands()),
        x_load=x_load, loads=row_loads(r.roles.prologue[1:], "col", any_layout=any_layout),
        pro_call=r.pro_call("v[j][q]", first="v[j][q]"), tail=_tail(r, variant),
    )


def _tail(r: Reduction, variant: ReductionVariant) -> str:
    """The kernel body after the row is cached in v[MAXV][VEC]: reduce and store one value, or
    statistics and the normalised row."""
    if r.kind in ROW_OP:
        return render(
            "reduction/row_reduce.cu", op=ROW_OP[r.kind], valid=VALID,
            fin="ks_div_norm(r, (float)R)" if r.kind == "mean" else "r", store=r.store_scalar("row"),
        )
    stats = cached_stats(r.kind, row_cache(VALID), r.spec.eps, variant.row_exp)
    if r.kind == "logsumexp":
        return stats + render("reduction/row_logsumexp.cu", store=r.store_scalar("row"))
    w_loads, w_upd = r.affine("VEC", "col", "yv[q]", "q")
    return stats + render(
        "reduction/row_store.cu", valid=VALID, w_loads=w_loads, w_upd=w_upd,
        e_loads=row_loads(r.roles.epilogue, "col", "e", row_any_layout(r.kind)), y=cached_normalize(r.kind, "v[j][q]"),
        epi=r.epi_call("yv[q]", "q"),
    )


def launches(r: Reduction) -> str:
    """Launcher code: the first instantiation whose plan test matches launches."""
    # (path, vec, values each thread caches, min blocks per SM and block-size bound for
    # __launch_bounds__, plan test)
    # Sub-warp rows: 16 values a lane under a 128-register cap (ptxas spilled softmax and
    # multi-operand layer_norm rows under 64); reduce kinds keep no row for a second pass and fit
    # 64 (level2/25's amin with a bias prologue and two tanh: 56 registers, no spill, against 100
    # under 128), which doubles the rows in flight per SM: short rows are latency-bound.
    sub_minb = 4 if r.kind in ROW_OP else 2
    variants = [("KS_PATH_ROW_SUB", v, 16, sub_minb, 256, "") for v in sorted({1, r.vec})]
    variants += [("KS_PATH_ROW_WARP", v, 32, 1, 256, "") for v in sorted({1, r.vec})]
    variants.append(("KS_PATH_ROW_BLOCK", 1, BLOCK_SCALAR_VALUES, 1, 512, ""))
    if r.vec > 1:
        if r.kind in ROWS32_KINDS:  # 32 values under a 64-register cap, 4 rows per SM
            variants.append(("KS_PATH_ROW_BLOCK", r.vec, 32, 4, 256,
                             " && plan.row_values == 32 && plan.threads_x <= 256"))
        variants.append(("KS_PATH_ROW_BLOCK", r.vec, 32, 1, 512, " && plan.row_values == 32"))
        if r.normalizing:  # 16 values under a 64-register cap: more rows in flight per SM
            variants.append(("KS_PATH_ROW_BLOCK", r.vec, 16, 2, 512, " && plan.row_values == 16"))
    return "\n".join(
        render(
            "reduction/row_launch.cu", path=path, v=v, name=r.name, maxv=max(1, values // v),
            warp="true" if warp else "false", minb=minb, maxt=maxt, test=test, args=r.args,
            threads="256" if warp else "plan.threads_x", bx="32" if warp else "plan.threads_x",
            by="8" if warp else "1", rows_per_block=_ROWS_PER_BLOCK[path],
            lanes=_LANES[path],
        )
        for path, v, values, minb, maxt, test in variants
        for warp in [path in ("KS_PATH_ROW_WARP", "KS_PATH_ROW_SUB")]
    )


# Warp paths launch (32, 8) blocks: 8 warps of 32 / lanes rows each.
_LANES = {"KS_PATH_ROW_SUB": "plan.threads_x", "KS_PATH_ROW_WARP": "32", "KS_PATH_ROW_BLOCK": "1"}
_ROWS_PER_BLOCK = {"KS_PATH_ROW_SUB": "8 * (32 / plan.threads_x)", "KS_PATH_ROW_WARP": "8",
                   "KS_PATH_ROW_BLOCK": "1"}
