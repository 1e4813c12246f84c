"""Tile kernels (inner > 1, long rows, or too few rows to fill the GPU): consecutive threads take
consecutive inner indices (coalesced), threads along R keep online states (sum, max, online
max+sum-exp, Welford), merged in shared memory; R is split across blocks when the columns alone
cannot fill the SMs, and a finalize kernel merges the partial states.  Normalising kinds then run
an apply kernel (statistics + one more read of the input).  Every plan can fall back here."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import (
    NORMALIZE,
    Reduction,
    ReductionVariant,
    column_bases,
    column_loads,
    loads,
    row_loads,
)
from kernelstitch.agents.coder.codegen.templates import render


def kernels(r: Reduction, variant: ReductionVariant = ReductionVariant()) -> str:
    """The tile kernel and the finalize kernel of R-split partial states (and group_norm's
    channel-span kernels; `variant.batched_loads`: its channels-last apply's loads)."""
    tile = render(
        "reduction/tile.cu", name=r.name, params=r.params, out_t=r.out_t, state=r.state,
        bases=column_bases(r.roles.prologue), loads1=column_loads(r.roles.prologue, "a"),
        pro_x=r.pro_call("x[u]"), final=r.final_block("col"),
    )
    return tile + (_group_norm_spans(r, variant.batched_loads) if r.kind == "group_norm" else "")


def _group_norm_spans(r: Reduction, batched_loads: bool) -> str:
    """Long group_norm rows by channel spans: operand bases once per span (gn_span.cu)."""
    def bases(ks: list[int]) -> str:
        return " ".join(f"const int64_t b{k} = ks_row_base_any(d{k}, row, R);" for k in ks)

    w_loads, w_upd = r.affine("VEC", "col", "y", "q")
    return _group_norm_nhwc(r, batched_loads) + render(
        "reduction/gn_span.cu", name=r.name, params=r.params, out_t=r.out_t,
        bases_stats=bases(list(r.roles.prologue)), bases=bases(r.row_operands()),
        loads=row_loads(r.roles.prologue, "col", any_layout=True), pro_x=r.pro_call("x"),
        w_loads=w_loads, w_upd=w_upd, e_loads=row_loads(r.roles.epilogue, "col", "e", True),
        epi=r.epi_call("y", "q"))


def _group_norm_nhwc(r: Reduction, batched_loads: bool) -> str:
    """group_norm of a channels-last input (gn_nhwc.cu): every operand but the input is constant
    along the spatial dims there (the binding checks), so it is loaded once a thread at the
    base of the thread's (n, c) row.  `batched_loads`: the apply loads all its slots first."""
    def hoist(ks: list[int], prefix: str) -> str:
        return " ".join(f"float {prefix}{k}[1] = {{ks_ld(p{k} + ks_row_base_any(d{k}, row, S))}};" for k in ks)

    affine = [k for k in (r.roles.weight, r.roles.bias) if k is not None]
    _, w_upd = r.affine("1", "0", "y", "q")
    return render(
        "reduction/gn_nhwc.cu", name=r.name, params=r.params, out_t=r.out_t,
        hoists=hoist([k for k in r.roles.prologue if k != 0], "a"),
        apply_hoists=hoist(affine, "w") + " " + hoist(list(r.roles.epilogue), "e"),
        pro_x=r.pro_call("x"), w_upd=w_upd, epi=r.epi_call("y", "q"), batched=int(batched_loads))


def apply_kernel(r: Reduction) -> str:
    """Normalising kinds: y = normalize(prologue(x), the column's statistics); "" otherwise."""
    if not r.normalizing:
        return ""
    w_loads, w_upd = r.affine("1", "idx", "y", "0")
    return render(
        "reduction/apply.cu", name=r.name, params=r.params, out_t=r.out_t,
        loads1=loads(r.roles.prologue, "1", "idx"), pro_x=r.pro_call("x"), norm=NORMALIZE[r.kind],
        w_loads=w_loads, w_upd=w_upd, e_loads=loads(r.roles.epilogue, "1", "idx", "e"), epi=r.epi_call("y", "0"),
        bases=column_bases(r.column_operands()), row_loads1=column_loads(r.roles.prologue, "a"),
        row_e_loads=column_loads(r.roles.epilogue, "e"),
    )


def launch(r: Reduction) -> str:
    """The launcher's last part: every plan that no other family took."""
    apply_launch = render("reduction/apply_launch.cu", name=r.name, args=r.args) if r.normalizing else ""
    # the KEEP apply is instantiated only for a spec that keeps its output channels-last
    keep_launch = (render("reduction/gn_nhwc_keep_launch.cu")
                   if r.spec.keep_channels_last else "")
    spans = (render("reduction/gn_nhwc_launch.cu", name=r.name, args=r.args, keep_launch=keep_launch)
             + render("reduction/gn_span_launch.cu", name=r.name, args=r.args, vec=r.vec)) if r.kind == "group_norm" else ""
    return spans + render("reduction/tile_launch.cu", name=r.name, args=r.args, nf=r.nf, apply_launch=apply_launch)
