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
    loads,
)
from kernelstitch.agents.coder.codegen.templates import render

# y from x[u] and the statistics of finalize_stats (plus `inv`, softmax's 1 / sum).
_NORMALIZE = {
    "softmax": "expf(x[u] - s0) * inv",
    "log_softmax": "x[u] - s0 - s1",
}


def has_colloop(kind: str) -> bool:
    return kind not in AFFINE_KINDS


def kernel(r: Reduction) -> str:
    if not has_colloop(r.kind):
        return ""
    pro_loads, pro_x = loads(r.roles.prologue, "1", "idx"), r.pro_call("x[u]")
    if r.normalizing:
        inv = " const float inv = 1.f / s1; (void)inv;" if r.kind == "softmax" else ""
        finish = render(
            "reduction/colloop_normalize.cu", stats=finalize_stats(r.kind, r.spec.eps) + inv,
            loads1=pro_loads, pro_x=pro_x, y=_NORMALIZE[r.kind],
            e_loads=loads(r.roles.epilogue, "1", "idx", "e"), epi=r.epi_call("y", "0"), out_t=r.out_t)
    else:
        finish = "    " + r.final_block("c")
    return render("reduction/colloop.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
                  loads1=pro_loads, pro_x=pro_x, finish=finish)


def launch(r: Reduction) -> str:
    if not has_colloop(r.kind):
        return ""
    return render("reduction/colloop_launch.cu", name=r.name, args=r.args)
