"""Softmax / log_softmax along a strided dim with thread-block clusters (Hopper, sm_90+).

The tensor is seen as [outer, R, inner].  A cluster of C CTAs owns a strip of W = VEC * TXV
consecutive inner columns of one outer slice and all R rows; CTA `rank` keeps rows
[rank * TYR * RPT, (rank + 1) * TYR * RPT) in registers (RPT rows x VEC columns per thread,
16-byte loads, all issued before the first use).  Per-column (max, sum-of-exp) pairs are merged
down the CTA in shared memory, then across the cluster through distributed shared memory, and the
registers are written back normalised: one read and one write of global memory, with rows read
as W-element segments (128 bytes) instead of the 64 of the shared-memory column tiles.

Chosen on the H100 by microbenchmark (bench/results/2026-11-24-h100/RUN.md): for
[32, 1024, 4096] fp32, W = 32 columns, 16 threads along R with 16 rows each, clusters of 4, ran at
85% of the copy bandwidth in a hand-written kernel and 83% as emitted here, where the
shared-memory column tiles ran at 59%; clusters of 8 or 16 and wider strips were slower.  Only
one thread per column reads the peers' pairs: every thread doing so multiplied the
distributed-shared-memory traffic (clusters of 8 ran 4x slower).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelstitch.agents.coder.codegen.templates import render


@dataclass(frozen=True)
class ClusterShape:
    """Template arguments of the cluster kernel for one storage width."""

    vec: int  # elements per 16-byte access
    txv: int  # threads along inner (each VEC columns)
    tyr: int  # threads along R
    rpt: int  # rows each thread keeps

    @property
    def rows_per_cta(self) -> int:
        return self.tyr * self.rpt


MAX_CLUSTER = 8  # the portable cluster size


def cluster_shape(vec: int) -> ClusterShape:
    """fp32 (vec 4): the measured best.  2-byte types (vec 8): the same 64 values per thread, so
    8 rows each; strips of 64 columns (128 bytes)."""
    return ClusterShape(vec=vec, txv=8, tyr=16, rpt=16 * 4 // vec)


# The kernel (and the guarded ks_lse_merge before it) is cuda/reduction/cluster.cu; its launch is
# cuda/reduction/cluster_launch.cu.

# y from the cached (prologue-applied) value v[j][q] and the column's ms[q], s1[q]: (s1, y)
_NORMALIZE = {
    "softmax": ("1.f / t.y", "__expf(v[j][q] - ms[q]) * s1[q]"),
    "log_softmax": ("logf(t.y)", "v[j][q] - ms[q] - s1[q]"),
}
# Without fast math (accurate expf, ks_max, a division): as emitted before the microbenchmark
# chose fast math, kept for its comparison (bench/microbench/cols_gen.py).
_NORMALIZE_ACCURATE = {
    "softmax": ("t.y", "ks_div_norm(expf(v[j][q] - ms[q]), s1[q])"),
    "log_softmax": _NORMALIZE["log_softmax"],
}


def cluster_kernel(kind: str, name: str, params: str, out_t: str, loads: str, pro_call: str,
                   e_loads: str, epi: str, plain: bool, fast_math: bool = True,
                   min_blocks: int | None = None) -> str:
    """The kernel text.  `loads` fills a{k}[VEC] at `idx` (and may test FULL), `pro_call` writes
    v[j][q] from a{k}[q], `e_loads` fills e{k}[VEC] at `idx`, `epi` updates yv[q] in place;
    `plain`: fp32 without prologue or epilogue ops (the tighter register cap).  `fast_math` and
    `min_blocks` (None: by `plain`; 0: no minimum) are the microbenchmark's knobs; ks_lse_merge sits
    under an include guard, so its exp is the first cluster kernel's of a translation unit."""
    s1, y = (_NORMALIZE if fast_math else _NORMALIZE_ACCURATE)[kind]
    minb = (5 if plain else 4) if min_blocks is None else min_blocks
    return render(
        "reduction/cluster.cu", name=name, params=params, out_t=out_t, loads=loads, pro_call=pro_call,
        e_loads=e_loads, epi=epi, s1=s1, y=y, minb=minb,
        launch_bounds=f"TXV * TYR, {minb}" if minb else "TXV * TYR",
        exp="__expf" if fast_math else "expf", max="fmaxf" if fast_math else "ks_max",
    )


def cluster_launch(name: str, args: str, shape: ClusterShape, nin: int, full_loads: bool = True) -> str:
    """Launcher code: the cluster kernel when the plan is column tiles, the operands were described
    for 16-byte accesses, R fits MAX_CLUSTER CTAs and the device has clusters (sm_90+); otherwise
    it falls through to the shared-memory column tiles.  A refused cluster launch falls through
    too, its error cleared.  `full_loads` False: contiguous operands too go through the
    descriptors (the microbenchmark's comparison)."""
    return render(
        "reduction/cluster_launch.cu", vec=shape.vec, max_rows=MAX_CLUSTER * shape.rows_per_cta,
        rows_per_cta=shape.rows_per_cta, width=shape.vec * shape.txv, threads=shape.txv * shape.tyr, name=name,
        txv=shape.txv, tyr=shape.tyr, rpt=shape.rpt, args=args, nin=nin, full="true" if full_loads else "false",
    )
