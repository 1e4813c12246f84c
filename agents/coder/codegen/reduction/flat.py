"""Flat kernels (ks_plan_reduction's KS_PATH_FLAT): reduce kinds over long rows with inner == 1
that the row kernels do not take, full reductions to one value above all (a loss's mean over
every element).  Blocks take `chunk`-long pieces of a row, 16-byte loads where the binding's
width allows, and a block per row merges the pieces' partial states (cuda/reduction/flat.cu).
Normalising kinds keep the tile path (their apply kernel reads the tile path's statistics)."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import Reduction, loads
from kernelstitch.agents.coder.codegen.templates import render


def has_flat(r: Reduction) -> bool:
    return not r.normalizing


def kernel(r: Reduction) -> str:
    if not has_flat(r):
        return ""
    return render(
        "reduction/flat.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
        loads=loads(r.roles.prologue, "VEC", "idx"), pro_x=r.pro_call("x[u * VEC + q]"),
        pro_x1=r.pro_call("x[q]"), final=r.final_block("col"))


def launch(r: Reduction) -> str:
    if not has_flat(r):
        return ""
    widths = sorted({1, r.vec}, reverse=True)
    calls = "\n".join(
        f"    {'else ' if k else ''}{'if (vec == ' + str(v) + ') ' if v != 1 else ''}"
        f"{r.name}_flat<{v}><<<blocks, 256, 0, stream>>>({r.args}, o, workspace, outer, R, plan.r_per_split, plan.splits);"
        for k, v in enumerate(widths))
    return render("reduction/flat_launch.cu", name=r.name, args=r.args, flat_calls=calls)
