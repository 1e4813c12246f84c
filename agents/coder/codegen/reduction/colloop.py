"""Column-loop kernels (ks_plan_reduction's KS_PATH_COLLOOP): a reduced dim that is strided
(inner >= 32) with enough (outer, inner) columns to fill the GPU.  A thread per column walks R
(cuda/reduction/colloop.cu); reduce kinds store one value per column, softmax kinds read the column
again to normalise it.  Every kind but the affine ones (layer_norm, group_norm: the binding replans
those to the tile path) has it."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import (
    AFFINE_KINDS,
    Reduction,
    finalize_stats,
)
from kernelstitch.agents.coder.codegen.templates import render

# y from x[u] and the statistics of finalize_stats, plus `poison` (NaN when the column holds +inf:
# PyTorch's exp(inf - inf) makes the whole column NaN, where the chunked sum counted it as 1) and
# `inv`, softmax's 1 / sum; fast exp as the chunked sums (ks_push_n<true>).
_NORMALIZE = {
    "softmax": "__expf(x[u] - s0) * inv",
    "log_softmax": "x[u] - s0 - s1 + poison",
}
_POISON = " const float poison = st.m == KS_INF ? __int_as_float(0x7fffffff) : 0.f;"


def _bases(ks: list[int]) -> str:
    """Per column: each operand's offset at r = 0 and its step per r (used when AFFINE)."""
    return " ".join(f"const int64_t cb{k} = AFFINE ? ks_offset(d{k}, base) : 0, cs{k} = AFFINE ? ks_col_step(d{k}, inner) : 0; "
                    f"(void)cb{k}; (void)cs{k};" for k in ks)


def _loads(ks: tuple[int, ...], prefix: str) -> str:
    """One value of each operand at r = rr (flat index idx): column base + rr * step when AFFINE."""
    return " ".join(f"float {prefix}{k}[1]; if constexpr (AFFINE) {prefix}{k}[0] = ks_ld(p{k} + (cb{k} + rr * cs{k})); "
                    f"else ks_load<1>(p{k}, d{k}, idx, {prefix}{k});" for k in ks)


def has_colloop(kind: str) -> bool:
    return kind not in AFFINE_KINDS


def kernel(r: Reduction) -> str:
    if not has_colloop(r.kind):
        return ""
    pro_loads, pro_x = _loads(r.roles.prologue, "a"), r.pro_call("x[u]")
    if r.normalizing:
        inv = " const float inv = 1.f / s1 + poison; (void)inv;" if r.kind == "softmax" else ""
        finish = render(
            "reduction/colloop_normalize.cu", stats=finalize_stats(r.kind, r.spec.eps) + _POISON + inv,
            loads1=pro_loads, pro_x=pro_x, y=_NORMALIZE[r.kind],
            e_loads=_loads(r.roles.epilogue, "e"), epi=r.epi_call("y", "0"), out_t=r.out_t)
    else:
        finish = "    " + r.final_block("c")
    return render("reduction/colloop.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
                  bases=_bases(r.column_operands()), loads1=pro_loads, pro_x=pro_x, finish=finish)


def launch(r: Reduction) -> str:
    if not has_colloop(r.kind):
        return ""
    return render("reduction/colloop_launch.cu", name=r.name, args=r.args)
