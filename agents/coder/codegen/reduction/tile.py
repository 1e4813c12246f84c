"""Tile kernels (inner > 1, long rows, or too few rows to fill the GPU): consecutive threads take
consecutive inner indices (coalesced), threads along R keep online states (sum, max, online
max+sum-exp, Welford), merged in shared memory; R is split across blocks when the columns alone
cannot fill the SMs, and a finalize kernel merges the partial states.  Normalising kinds then run
an apply kernel (statistics + one more read of the input).  Every plan can fall back here."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import NORMALIZE, Reduction, loads
from kernelstitch.agents.coder.codegen.templates import render


def kernels(r: Reduction) -> str:
    """The tile kernel and the finalize kernel of R-split partial states."""
    return render(
        "reduction/tile.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
        loads1=loads(r.roles.prologue, "1", "idx"), pro_x=r.pro_call("x[u]"), final=r.final_block("col"),
    )


def apply_kernel(r: Reduction) -> str:
    """Normalising kinds: y = normalize(prologue(x), the column's statistics); "" otherwise."""
    if not r.normalizing:
        return ""
    w_loads, w_upd = r.affine("1", "idx", "y", "0")
    return render(
        "reduction/apply.cu", name=r.name, params=r.params, out_t=r.out_t,
        loads1=loads(r.roles.prologue, "1", "idx"), pro_x=r.pro_call("x"), norm=NORMALIZE[r.kind],
        w_loads=w_loads, w_upd=w_upd, e_loads=loads(r.roles.epilogue, "1", "idx", "e"), epi=r.epi_call("y", "0"),
    )


def launch(r: Reduction) -> str:
    """The launcher's last part: every plan that no other family took."""
    apply_launch = render("reduction/apply_launch.cu", name=r.name, args=r.args) if r.normalizing else ""
    return render("reduction/tile_launch.cu", name=r.name, args=r.args, nf=r.nf, apply_launch=apply_launch)
