"""Column-loop kernels (ks_plan_reduction's KS_PATH_COLLOOP): a reduced dim that is strided
(inner >= 32) with enough (outer, inner) columns to fill the GPU.  A thread per column walks R
(cuda/reduction/colloop.cu); reduce kinds store one value per column, softmax kinds read the column
again to normalise it.  Every kind but the affine ones (layer_norm, group_norm: the binding replans
those to the tile path) has it."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import (
    AFFINE_KINDS,
    Reduction,
    ReductionVariant,
    column_bases,
    column_loads,
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


def has_colloop(kind: str) -> bool:
    return kind not in AFFINE_KINDS


# The last R % 8 values of a column: one load at a time (the default), or one predicated batch
# of up to 8 loads pushed in order (ReductionVariant.colloop_tail_batch).
_TAIL_SINGLE = """    for (; r < R; ++r) {
      const int64_t rr = r, idx = base + rr * inner;
      (void)idx; (void)rr;
      float x[1]; const int u = 0;
      {loads1}
      const int q = 0; {pro_x}
      st.push(x[0]);
    }"""
_TAIL_BATCH = """    if (r < R) {
      const int left = (int)(R - r);  // 1 .. 7
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (u < left) {
          const int64_t rr = r + u, idx = base + rr * inner;
          (void)idx; (void)rr;
          {loads1}
          const int q = 0; {pro_x}
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (u < left) st.push(x[u]);
    }"""


def kernel(r: Reduction, variant: ReductionVariant = ReductionVariant()) -> str:
    if not has_colloop(r.kind):
        return ""
    pro_loads, pro_x = column_loads(r.roles.prologue, "a"), r.pro_call("x[u]")
    tail = (_TAIL_BATCH if variant.colloop_tail_batch else _TAIL_SINGLE).replace("{loads1}", pro_loads).replace(
        "{pro_x}", pro_x)
    if r.normalizing:
        inv = " const float inv = 1.f / s1 + poison; (void)inv;" if r.kind == "softmax" else ""
        finish = render(
            "reduction/colloop_normalize.cu", stats=finalize_stats(r.kind, r.spec.eps) + _POISON + inv,
            loads1=pro_loads, pro_x=pro_x, y=_NORMALIZE[r.kind],
            e_loads=column_loads(r.roles.epilogue, "e"), epi=r.epi_call("y", "0"), out_t=r.out_t)
    else:
        finish = "    " + r.final_block("c")
    return render("reduction/colloop.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
                  bases=column_bases(r.column_operands()), loads1=pro_loads, pro_x=pro_x, tail=tail,
                  finish=finish)


def launch(r: Reduction) -> str:
    if not has_colloop(r.kind):
        return ""
    return render("reduction/colloop_launch.cu", name=r.name, args=r.args)
