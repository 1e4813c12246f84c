"""Reduction emitter: sum, mean, amax, amin, logsumexp, softmax, log_softmax and layer_norm over a
tensor seen as [outer, R, inner], with the elementwise prologue and epilogue fused.

Paths (chosen at run time by `ks_plan_reduction`, shared with the binding):

* row kernels (inner == 1, R <= 16K): the row is loaded once into registers with 16-byte vector
  loads (a warp per row up to R = 1024, a block per row beyond), reduced with warp shuffles (+
  shared memory across warps), and for softmax / log_softmax / layer_norm written back from the
  registers: one read and one write of memory.  Softmax stats are max then sum of exp from the
  cached values; layer_norm is two-pass over the cached values (mean, then squared deviations).
* tile kernel (inner > 1, long rows, or too few rows to fill the GPU): consecutive threads take
  consecutive inner indices (coalesced), threads along R keep online states (sum, max, online
  max+sum-exp, Welford), merged in shared memory; R is split across blocks when the columns alone
  cannot fill the SMs, and a finalize kernel merges the partial states.  Normalising kinds then
  run an apply kernel (statistics + one more read of the input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from string import Template

from kernelstitch.agents.coder.codegen.cluster_cols import (
    cluster_kernel,
    cluster_launch,
    cluster_shape,
)
from kernelstitch.agents.coder.codegen.common import (
    BLOCK_SCALAR_VALUES,
    CUDA_PRELUDE,
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    vector_width,
)
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.plan.kernel_spec import (
    ReductionSpec,
)

NORMALIZING = frozenset({"softmax", "log_softmax", "layer_norm"})
# Kinds with a column-tile kernel (a strided reduced dim).  layer_norm has none: it always reduces
# trailing dims (inner == 1), and the binding sends any other plan to the tile path.
COLUMN_TILE_KINDS = frozenset({"softmax", "log_softmax"})
# Kinds with the 32-value row kernel on <= 256 threads under a 64-register cap (ks_plan_reduction's
# rows32): layer_norm's weight and bias loads spilled there.
ROWS32_KINDS = frozenset({"softmax", "log_softmax"})
_STATE = {
    "sum": "KsStateSum", "mean": "KsStateSum", "amax": "KsStateMax", "amin": "KsStateMin",
    "logsumexp": "KsStateLse", "softmax": "KsStateLse", "log_softmax": "KsStateLse",
    "layer_norm": "KsStateWelford",
}
_STATE_FLOATS = {"KsStateSum": 1, "KsStateMax": 1, "KsStateMin": 1, "KsStateLse": 2, "KsStateWelford": 3}
_ROW_OP = {"sum": "KsOpSum", "mean": "KsOpSum", "amax": "KsOpMax", "amin": "KsOpMin"}


@dataclass(frozen=True)
class _Roles:
    """Which `inputs` feed the prologue, the layer_norm affine, and the epilogue."""

    prologue: tuple[int, ...]
    weight: int | None
    bias: int | None
    epilogue: tuple[int, ...]


def _roles(spec: ReductionSpec) -> _Roles:
    names = [t.name for t in spec.inputs]
    if not names:
        raise ValueError(f"{spec.name}: a reduction needs at least one input")
    if len(set(names)) != len(names):
        raise ValueError(f"{spec.name}: duplicate input names {names}")
    for n in list(spec.epilogue_inputs) + [spec.weight, spec.bias]:
        if n is not None and n not in names:
            raise ValueError(f"{spec.name}: {n!r} is not one of the inputs {names}")
    if (spec.weight or spec.bias) and spec.kind != "layer_norm":
        raise ValueError(f"{spec.name}: weight/bias are only for layer_norm")
    special = set(spec.epilogue_inputs) | {spec.weight, spec.bias}
    prologue = tuple(k for k, n in enumerate(names) if n not in special)
    if not prologue or prologue[0] != 0:
        raise ValueError(f"{spec.name}: inputs[0] must be the reduced tensor (a prologue input)")
    return _Roles(
        prologue=prologue,
        weight=names.index(spec.weight) if spec.weight else None,
        bias=names.index(spec.bias) if spec.bias else None,
        epilogue=tuple(names.index(n) for n in spec.epilogue_inputs),
    )


def _loads(ks: tuple[int, ...], width: str, index: str, prefix: str = "a") -> str:
    """Operand loads into `{prefix}{k}[width]` at linear index `index` (any layout)."""
    return " ".join(f"float {prefix}{k}[{width}]; ks_load<{width}>(p{k}, d{k}, {index}, {prefix}{k});" for k in ks)


def _full_or_described_loads(ks: tuple[int, ...], prefix: str) -> str:
    """VEC-wide loads at `idx`: plain 16-byte loads when the kernel's FULL flag says every operand
    is a contiguous full-size tensor, else through the descriptors."""
    return " ".join(
        f"float {prefix}{k}[VEC]; if constexpr (FULL) ks_ld_vec<VEC>(p{k} + idx, {prefix}{k}); "
        f"else ks_load<VEC>(p{k}, d{k}, idx, {prefix}{k});" for k in ks)


def _row_loads(ks: tuple[int, ...], col: str, prefix: str = "a") -> str:
    """Row-kernel loads of VEC elements at `col` of the current row (bases b{k} set per row)."""
    return " ".join(f"float {prefix}{k}[VEC]; ks_load_row<VEC>(p{k}, d{k}, b{k}, {col}, {prefix}{k});" for k in ks)


def emit_reduction(spec: ReductionSpec) -> KernelSource:
    name = check_identifier(spec.name)
    if spec.kind not in _STATE:
        raise ValueError(f"{name}: unknown reduction kind {spec.kind!r}")
    roles = _roles(spec)
    normalizing = spec.kind in NORMALIZING
    state = _STATE[spec.kind]
    nf = _STATE_FLOATS[state]
    vec = vector_width([t.dtype for t in spec.inputs] + [spec.out_dtype])
    out_t = CUDA_TYPE[spec.out_dtype]
    in_names = [t.name for t in spec.inputs]

    pro_out = spec.prologue_out or (spec.prologue[-1].out if spec.prologue else in_names[0])
    pro = compile_ops(f"{name}_pro", tuple(in_names[k] for k in roles.prologue), spec.prologue, (pro_out,))
    epi = compile_ops(
        f"{name}_epi", ("acc",) + tuple(in_names[k] for k in roles.epilogue), spec.epilogue, (spec.epilogue_out,)
    )

    def pro_call(index: str, dest: str) -> str:  # a{k}[q] already loaded
        return f"{name}_pro({', '.join(f'a{k}[q]' for k in roles.prologue)}, {dest});"

    def epi_call(value: str, q: str) -> str:  # e{k}[q] already loaded; in place on value
        args = [value] + [f"e{k}[{q}]" for k in roles.epilogue] + [value]
        return f"{name}_epi({', '.join(args)});"

    def affine(width: str, index: str, value: str, q: str) -> tuple[str, str]:
        """layer_norm weight/bias: (load statements, in-place update)."""
        loads, upd = [], []
        row = width != "1"

        def load(k: int) -> str:
            return _row_loads((k,), index, "w") if row else _loads((k,), width, index, "w")

        if roles.weight is not None:
            loads.append(load(roles.weight))
            upd.append(f"{value} *= w{roles.weight}[{q}];")
        if roles.bias is not None:
            loads.append(load(roles.bias))
            upd.append(f"{value} += w{roles.bias}[{q}];")
        return " ".join(loads), " ".join(upd)

    # Parameters shared by every kernel of this spec: operands in `inputs` order.
    params = ", ".join(
        f"const {CUDA_TYPE[t.dtype]}* __restrict__ p{k}, const __grid_constant__ KsOperand d{k}"
        for k, t in enumerate(spec.inputs)
    )
    args = ", ".join(
        f"static_cast<const {CUDA_TYPE[t.dtype]}*>(ins[{k}]), descs[{k}]" for k, t in enumerate(spec.inputs)
    )

    # ---- reduced value -> stored scalar (reduce kinds), at output index `oidx` ----
    finalize_scalar = {
        "sum": "const float acc = st.a;",
        "mean": "const float acc = ks_div_norm(st.a, (float)R);",
        "amax": "const float acc = st.a;",
        "amin": "const float acc = st.a;",
        "logsumexp": "const float acc = st.m == -KS_INF ? -KS_INF : st.m + logf(st.s);",
    }
    # ---- statistics (normalising kinds): two floats per row/column ----
    finalize_stats = {
        "softmax": "const float s0 = st.m == -KS_INF ? 0.f : st.m, s1 = st.s;",
        "log_softmax": "const float s0 = st.m == -KS_INF ? 0.f : st.m, s1 = logf(st.s);",
        "layer_norm": f"const float s0 = st.mean, s1 = rsqrtf(ks_div_norm(st.m2, st.n) + {_c(spec.eps)});",
    }
    normalize = {  # x -> y with stats s0, s1
        "softmax": "expf(x - s0) / s1",
        "log_softmax": "x - s0 - s1",
        "layer_norm": "(x - s0) * s1",
    }

    def store_scalar(oidx: str) -> str:
        return (
            f"{{ float y = acc; {_loads(roles.epilogue, '1', oidx, 'e')} {epi_call('y', '0')} "
            f"out[{oidx}] = ks_from_float<{out_t}>(y); }}"
        )

    def final_block(col: str) -> str:
        """Inside the tile/finalize kernels: state `st` for output column `col`."""
        if normalizing:
            return f"{finalize_stats[spec.kind]} stats[2 * {col}] = s0; stats[2 * {col} + 1] = s1;"
        return f"{finalize_scalar[spec.kind]} {store_scalar(col)}"

    # ---- row kernel body after the row is cached in v[MAXV][VEC] ----
    valid = "((j * TX + tx) * VEC < Ri)"
    if spec.kind in _ROW_OP:
        op = _ROW_OP[spec.kind]
        row_tail = Template(
            """
    float r = ${op}::identity();
#pragma unroll
    for (int j = 0; j < MAXV; ++j) if (${valid}) {
#pragma unroll
      for (int q = 0; q < VEC; ++q) r = ${op}::apply(r, v[j][q]);
    }
    r = ks_row_allreduce<${op}, WARP>(r, smem);
    if (tx == 0) {
      const float acc = ${fin};
      ${store}
    }"""
        ).substitute(
            op=op, valid=valid, fin="ks_div_norm(r, (float)R)" if spec.kind == "mean" else "r", store=store_scalar("row")
        )
    elif spec.kind == "logsumexp":
        row_tail = _cached_stats("logsumexp", _row_cache(valid), spec.eps) + f"""
    if (tx == 0) {{
      const float acc = ms + logf(s);
      {store_scalar("row")}
    }}"""
    else:
        row_tail = _cached_stats(spec.kind, _row_cache(valid), spec.eps) + _row_store(
            _CACHED_NORMALIZE[spec.kind].format(val="v[j][q]"), valid, roles, epi_call, affine, out_t)

    row_operands = list(roles.prologue) + [k for k in (roles.weight, roles.bias) if k is not None]
    if normalizing:
        row_operands += list(roles.epilogue)
    row_kernel = Template(
        """
// MAXT, MINB: the block size bound and min blocks per SM of __launch_bounds__, i.e. the register
// cap.  MINB 1 for 32 cached values under 512 threads: with it left out, ptxas aimed at 64
// registers and spilled the cached row; with 2 (a 128-register cap) the warp path's 32 scalar
// values spilled.  MINB 2 (64 registers) for the 16-value kernel of 512 threads, and MINB 4 (64
// registers) for normalising rows of 32 values on <= 256 threads: on the H100, more rows in
// flight per SM read log_softmax rows of 8192 in 0.411 ms (88% of the copy bandwidth) instead
// of 0.449 ms with the 16-value kernel (bench/results/2026-11-24-h100/RUN.md).
template <int VEC, int MAXV, bool WARP, int MINB, int MAXT>
__global__ void __launch_bounds__(MAXT, MINB)
${name}_row(${params}, ${out_t}* __restrict__ out, const int64_t outer, const int64_t R) {
  __shared__ float smem[33];
  const int tx = threadIdx.x;
  const int TX = WARP ? 32 : blockDim.x;
  const int Ri = (int)R;
  const int64_t row_step = WARP ? (int64_t)gridDim.x * blockDim.y : (int64_t)gridDim.x;
  for (int64_t row = WARP ? (int64_t)blockIdx.x * blockDim.y + threadIdx.y : (int64_t)blockIdx.x;
       row < outer; row += row_step) {
    ${bases}
    float v[MAXV][VEC];
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
      const int col = (j * TX + tx) * VEC;  // R <= KS_ROW_CAP: 32-bit column math
      if (col < Ri) {
        ${loads}
#pragma unroll
        for (int q = 0; q < VEC; ++q) ${pro_call}
      }
    }
${tail}
  }
}
"""
    ).substitute(
        name=name, params=params, out_t=out_t,
        bases=" ".join(f"const int64_t b{k} = ks_row_base(d{k}, row, R);" for k in row_operands), loads=_row_loads(roles.prologue, "col"),
        pro_call=pro_call("", "v[j][q]"), tail=row_tail,
    )

    tile_kernel = Template(
        """
// Threads (tx, ty): tx walks inner (consecutive addresses), ty walks R; blockIdx.y is the R split.
// Min-blocks 1 stated: left out, ptxas aimed at 48 registers and spilled the Welford state.
__global__ void __launch_bounds__(256, 1)
${name}_tile(${params}, ${out_t}* __restrict__ out, float* __restrict__ partials, float* __restrict__ stats,
             const int64_t outer, const int64_t R, const int64_t inner, const int64_t r_per_split) {
  using State = ${state};
  __shared__ float sm[State::NF][256];
  const int tx = threadIdx.x, ty = threadIdx.y, TXI = blockDim.x, TYR = blockDim.y;
  const int64_t cb = ks_div(inner + TXI - 1, TXI);  // ks_div: no 64-bit division call
  const int64_t o = ks_div((int64_t)blockIdx.x, cb);
  const int64_t i = ((int64_t)blockIdx.x - o * cb) * TXI + tx;
  const int64_t r0 = (int64_t)blockIdx.y * r_per_split;
  const int64_t r1 = r0 + r_per_split < R ? r0 + r_per_split : R;
  State st = State::init();
  if (i < inner) {
    const int64_t base = o * R * inner + i;
    int64_t r = r0 + ty;
    for (; r + 7 * TYR < r1; r += 8 * TYR) {  // 8 independent loads in flight per thread
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t idx = base + (r + (int64_t)u * TYR) * inner;
        ${loads1}
        const int q = 0; ${pro_x}
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) st.push(x[u]);
    }
    for (; r < r1; r += TYR) {
      const int64_t idx = base + r * inner;
      float x[1]; const int u = 0;
      ${loads1}
      const int q = 0; ${pro_x}
      st.push(x[0]);
    }
  }
  const int t = ty * TXI + tx;
  {
    float f[State::NF]; st.save(f);
#pragma unroll
    for (int k = 0; k < State::NF; ++k) sm[k][t] = f[k];
  }
  __syncthreads();
  for (int s = TYR / 2; s > 0; s >>= 1) {
    if (ty < s) {
      float f[State::NF];
#pragma unroll
      for (int k = 0; k < State::NF; ++k) f[k] = sm[k][t + s * TXI];
      st.merge(State::load(f));
      st.save(f);
#pragma unroll
      for (int k = 0; k < State::NF; ++k) sm[k][t] = f[k];
    }
    __syncthreads();
  }
  if (ty == 0 && i < inner) {
    const int64_t col = o * inner + i;
    if (gridDim.y == 1) {
      ${final}
    } else {
      st.save(partials + ((int64_t)blockIdx.y * outer * inner + col) * State::NF);
    }
  }
}

// Merges the R-split partial states of each column.
__global__ void __launch_bounds__(256)
${name}_finalize(${params}, ${out_t}* __restrict__ out, const float* __restrict__ partials, float* __restrict__ stats,
                 const int64_t cols, const int64_t splits, const int64_t R) {
  using State = ${state};
  for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < cols; col += (int64_t)gridDim.x * blockDim.x) {
    State st = State::init();
    for (int64_t s = 0; s < splits; ++s) st.merge(State::load(partials + (s * cols + col) * State::NF));
    ${final}
  }
}
"""
    ).substitute(
        name=name, params=params, out_t=out_t, state=state, loads1=_loads(roles.prologue, "1", "idx"),
        pro_x=pro_call("", "x[u]"), final=final_block("col"),
    )

    apply_kernel = ""
    if normalizing:
        w_loads, w_upd = affine("1", "idx", "y", "0")
        apply_kernel = Template(
            """
// Normalising kinds on the tile path: y = normalize(prologue(x), stats of its column).
__global__ void __launch_bounds__(256)
${name}_apply(${params}, ${out_t}* __restrict__ out, const float* __restrict__ stats,
              const int64_t outer, const int64_t R, const int64_t inner) {
  const int64_t n = outer * R * inner;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = ks_div(idx, R * inner);
    const int64_t col = o * inner + (idx - ks_div(idx, inner) * inner);
    ${loads1}
    float x; const int q = 0; ${pro_x}
    const float s0 = stats[2 * col], s1 = stats[2 * col + 1];
    float y = ${norm};
    ${w_loads} ${w_upd}
    ${e_loads} ${epi}
    out[idx] = ks_from_float<${out_t}>(y);
  }
}
"""
        ).substitute(
            name=name, params=params, out_t=out_t, loads1=_loads(roles.prologue, "1", "idx"), pro_x=pro_call("", "x"),
            norm=normalize[spec.kind], w_loads=w_loads, w_upd=w_upd,
            e_loads=_loads(roles.epilogue, "1", "idx", "e"), epi=epi_call("y", "0"),
        )

    cols_kernel, cols_launch = "", ""
    if spec.kind in COLUMN_TILE_KINDS:  # softmax kinds: no affine weight/bias to apply
        cols_kernel = Template(
            """
// Normalising kinds along a strided dim (see ks_plan_reduction): a (TX, TY) block owns TX
// consecutive inner columns of one outer slice and keeps its [R, TX] tile in shared memory
// (dynamic, R * TX floats), several blocks per SM.  Loads go out 16 at a time per thread before
// any is used; one read and one write of global memory, where the tile path reads the input
// twice.  A thread only reads back the tile entries it wrote (column tx, rows ty + k * TY), so
// the tile needs no barrier; threads meet only in ks_col_allreduce.
__global__ void __launch_bounds__(1024)
${name}_cols(${params}, ${out_t}* __restrict__ out, const int64_t outer, const int64_t R, const int64_t inner) {
  extern __shared__ float tile[];
  __shared__ float part[64][33];
  __shared__ float res[32];
  static_assert(sizeof(part) + sizeof(res) == KS_COLS_STATIC_SMEM, "the host plan sizes tiles with it");
  const int tx = threadIdx.x, ty = threadIdx.y, TX = blockDim.x, TY = blockDim.y;
  const int Ri = (int)R;  // R * TX floats fit in shared memory
  const int64_t cb = ks_div(inner + TX - 1, TX);
  for (int64_t blk = blockIdx.x; blk < outer * cb; blk += gridDim.x) {  // block-uniform
    const int64_t o = ks_div(blk, cb);
    const int64_t i = (blk - o * cb) * TX + tx;
    const bool live = i < inner;
    const int64_t base = o * R * inner + i;
    for (int r0 = ty; r0 < Ri; r0 += 16 * TY) {
      float xs[16];
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const int r = r0 + u * TY;
        if (live && r < Ri) {
          const int64_t idx = base + (int64_t)r * inner;
          ${loads1}
          const int q = 0; ${pro_x}
        }
      }
#pragma unroll
      for (int u = 0; u < 16; ++u) {
        const int r = r0 + u * TY;
        if (live && r < Ri) tile[r * TX + tx] = xs[u];
      }
    }
${stats}
#pragma unroll 4
    for (int r = ty; r < Ri; r += TY) if (live) {
      const int64_t idx = base + (int64_t)r * inner;
      const int q = 0; (void)q;
      float y = ${y};
      ${e_loads} ${epi}
      out[idx] = ks_from_float<${out_t}>(y);
    }
  }
}
"""
        ).substitute(
            name=name, params=params, out_t=out_t, loads1=_loads(roles.prologue, "1", "idx"),
            pro_x=pro_call("", "xs[u]"), stats=_cached_stats(spec.kind, _COLS_CACHE, spec.eps),
            y=_CACHED_NORMALIZE[spec.kind].format(val=_COLS_CACHE.val),
            e_loads=_loads(roles.epilogue, "1", "idx", "e"), epi=epi_call("y", "0"),
        )
        cols_launch = f"""  if (plan.path == KS_PATH_COLS) {{
    const size_t smem = (size_t)R * plan.threads_x * sizeof(float);
    static bool opted_in[64] = {{false}};  // the attribute is per device
    const int dev = ks_device_slot();
    if (!opted_in[dev]) {{
      opted_in[dev] = cudaFuncSetAttribute({name}_cols, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           ks_smem_optin() - KS_COLS_STATIC_SMEM) == cudaSuccess;
      // Not left pending for the binding's launch check: a tile that needed the opt-in fails
      // its own launch, with that error.
      if (!opted_in[dev]) (void)cudaGetLastError();
    }}
    const int threads = plan.threads_x * plan.threads_y;
    const int per_sm = ks_blocks_per_sm({name}_cols, threads, smem);  // R sets it: not cached
    const int64_t blocks = ks_grid(per_sm, outer * ks_cdiv(inner, plan.threads_x));
    {name}_cols<<<(unsigned)blocks, dim3(plan.threads_x, plan.threads_y), smem, stream>>>({args}, o, outer, R, inner);
    return;
  }}"""

    if spec.kind in COLUMN_TILE_KINDS:  # thread-block clusters first (sm_90+, 16-byte operands)
        cluster_kernel_text = cluster_kernel(
            spec.kind, name, params, out_t, loads=_full_or_described_loads(roles.prologue, "a"),
            pro_call=pro_call("", "v[j][q]"), e_loads=_full_or_described_loads(roles.epilogue, "e"),
            epi=epi_call("yv[q]", "q"), plain=vec == 4 and not spec.prologue and not spec.epilogue)
        cols_kernel = cluster_kernel_text + cols_kernel
        cols_launch = cluster_launch(name, args, cluster_shape(vec), len(spec.inputs)) + "\n" + cols_launch

    launcher_sig = (
        f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, float* workspace, "
        f"int64_t outer, int64_t R, int64_t inner, const KsRedPlan& plan, int vec, cudaStream_t stream)"
    )
    # (path, vec, values each thread caches, min blocks per SM and block-size bound for
    # __launch_bounds__, plan test); the first match launches.
    row_variants = [("KS_PATH_ROW_WARP", v, 32, 1, 256, "") for v in sorted({1, vec})]
    row_variants.append(("KS_PATH_ROW_BLOCK", 1, BLOCK_SCALAR_VALUES, 1, 512, ""))
    if vec > 1:
        if spec.kind in ROWS32_KINDS:  # 32 values under a 64-register cap, 4 rows per SM
            row_variants.append(("KS_PATH_ROW_BLOCK", vec, 32, 4, 256,
                                 " && plan.row_values == 32 && plan.threads_x <= 256"))
        row_variants.append(("KS_PATH_ROW_BLOCK", vec, 32, 1, 512, " && plan.row_values == 32"))
        if normalizing:  # 16 values under a 64-register cap: more rows in flight per SM
            row_variants.append(("KS_PATH_ROW_BLOCK", vec, 16, 2, 512, " && plan.row_values == 16"))
    launch_row = "\n".join(
        Template(
            """  if (plan.path == ${path} && vec == ${v}${test}) {
    auto kernel = ${name}_row<${v}, ${maxv}, ${warp}, ${minb}, ${maxt}>;
    static int per_sm_by_warps[17] = {0};  // per block size: the block path's varies with R
    int& per_sm = per_sm_by_warps[${threads} / 32];
    if (per_sm == 0) per_sm = ks_blocks_per_sm(kernel, ${threads});
    const dim3 block(${bx}, ${by});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer, ${rows_per_block}));
    kernel<<<(unsigned)blocks, block, 0, stream>>>(${args}, o, outer, R);
    return;
  }"""
        ).substitute(
            path=path, v=v, name=name, maxv=max(1, values // v), warp=str(path == "KS_PATH_ROW_WARP").lower(),
            minb=minb, maxt=maxt, test=test, args=args,
            threads="256" if path == "KS_PATH_ROW_WARP" else "plan.threads_x",
            bx="32" if path == "KS_PATH_ROW_WARP" else "plan.threads_x",
            by="8" if path == "KS_PATH_ROW_WARP" else "1",
            rows_per_block="8" if path == "KS_PATH_ROW_WARP" else "1",
        )
        for path, v, values, minb, maxt, test in row_variants
    )
    apply_launch = ""
    if normalizing:
        apply_launch = f"""
  {{
    static const int per_sm = ks_blocks_per_sm({name}_apply, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer * R * inner, 256));
    {name}_apply<<<(unsigned)blocks, 256, 0, stream>>>({args}, o, stats, outer, R, inner);
  }}"""
    cuda = f"""{CUDA_PRELUDE}
// ---- reduction kernel {name}: {spec.kind} ----
{pro.source}
{epi.source}
{row_kernel}
{cols_kernel}
{tile_kernel}
{apply_kernel}
{launcher_sig} {{
  {out_t}* o = static_cast<{out_t}*>(out);
  if (outer <= 0 || inner <= 0) return;
{launch_row}
{cols_launch}
  // Tile path: partial states first (when R is split), then statistics last.
  const int64_t cols = outer * inner;
  float* partials = workspace;
  float* stats = workspace + (plan.splits > 1 ? plan.splits * cols * {nf} : 0);
  const dim3 block(plan.threads_x, plan.threads_y);
  const dim3 grid((unsigned)(outer * ks_cdiv(inner, plan.threads_x)), (unsigned)plan.splits);
  {name}_tile<<<grid, block, 0, stream>>>({args}, o, partials, stats, outer, R, inner, plan.r_per_split);
  if (plan.splits > 1) {{
    static const int per_sm = ks_blocks_per_sm({name}_finalize, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(cols, 256));
    {name}_finalize<<<(unsigned)blocks, 256, 0, stream>>>({args}, o, partials, stats, cols, plan.splits, R);
  }}{apply_launch}
}}
"""
    binding = _binding(spec, roles, name, vec, nf, launcher_sig)
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=launcher_sig + ";",
        python_args=tuple(in_names),
        notes=(
            (
                f"{spec.kind}: row kernels keep the row in registers ({vec}-wide 16-byte loads when "
                "aligned), warp-per-row up to R=1024, block-per-row up to 16K"
            ),
            (
                "tile kernel for inner > 1 / long rows: coalesced along inner, online states, R split "
                "across blocks when columns cannot fill the SMs"
            ),
            "prologue/epilogue fused; fp32 accumulation (Welford for layer_norm on the tile path)",
        ),
    )


def _c(x: float) -> str:
    from kernelstitch.agents.coder.codegen.expr import c_float

    return c_float(x)


# y from a cached value `val` and the statistics of `_cached_stats`.
_CACHED_NORMALIZE = {
    "softmax": "ks_div_norm({val}, s)",  # the cache holds exp(x - max) by then
    "log_softmax": "{val} - ms - logs",
    "layer_norm": "({val} - mean) * rstd",
}


@dataclass(frozen=True)
class _Cache:
    """Where a kernel keeps the values it reduces: `each(body)` runs `body` for every valid
    cached value, which the body reads and may overwrite as `val`; `allreduce(op, x)` combines
    x over the threads that share the reduced range."""

    each: Callable[[str], str]
    val: str
    allreduce: Callable[[str, str], str]


def _row_cache(valid: str) -> _Cache:
    """Row kernels: registers v[MAXV][VEC]; slot j holds columns (j * TX + tx) * VEC + q."""
    return _Cache(
        each=lambda body: (f"#pragma unroll\n    for (int j = 0; j < MAXV; ++j) if ({valid}) {{\n"
                           f"#pragma unroll\n      for (int q = 0; q < VEC; ++q) {{ {body} }}\n    }}"),
        val="v[j][q]",
        allreduce=lambda op, x: f"ks_row_allreduce<{op}, WARP>({x}, smem)",
    )


_COLS_CACHE = _Cache(  # column-tile kernel: shared memory tile[R][TX], thread (tx, ty) walks r = ty + k * TY
    each=lambda body: f"#pragma unroll 4\n    for (int r = ty; r < Ri; r += TY) if (live) {{ {body} }}",
    val="tile[r * TX + tx]",
    allreduce=lambda op, x: f"ks_col_allreduce<{op}>({x}, part, res)",
)


def _cached_stats(kind: str, cache: _Cache, eps: float) -> str:
    """Statistics of cached values, declared for the store code that follows.  softmax kinds:
    max, then sum of exp (softmax overwrites the cache with the exponentials); layer_norm: mean,
    then squared deviations (two-pass over the cache, not Welford)."""
    v = cache.val
    if kind == "layer_norm":
        return f"""
    float s = 0.f;
    {cache.each(f"s += {v};")}
    const float mean = ks_div_norm({cache.allreduce("KsOpSum", "s")}, (float)R);
    float ss = 0.f;
    {cache.each(f"const float d = {v} - mean; ss += d * d;")}
    const float rstd = rsqrtf(ks_div_norm({cache.allreduce("KsOpSum", "ss")}, (float)R) + {_c(eps)});  // rsqrt, as PyTorch
"""
    keep = f" {v} = e;" if kind == "softmax" else ""
    text = f"""
    float m = -KS_INF;
    {cache.each(f"m = ks_max(m, {v});")}
    m = {cache.allreduce("KsOpMax", "m")};
    const float ms = m == -KS_INF ? 0.f : m;  // all -inf: sum is 0, no inf - inf
    float s = 0.f;
    {cache.each(f"const float e = expf({v} - ms); s += e;{keep}")}
    s = {cache.allreduce("KsOpSum", "s")};
"""
    if kind != "logsumexp":
        text += "    const float logs = logf(s); (void)logs;\n"
    return text


def _row_store(y: str, valid: str, roles: _Roles, epi_call, affine, out_t: str) -> str:
    """Write back a normalised row from the registers: affine, epilogue, 16-byte stores."""
    w_loads, w_upd = affine("VEC", "col", "yv[q]", "q")
    return Template(
        """
#pragma unroll
    for (int j = 0; j < MAXV; ++j) if (${valid}) {
      const int col = (j * TX + tx) * VEC;
      ${w_loads}
      ${e_loads}
      float yv[VEC];
#pragma unroll
      for (int q = 0; q < VEC; ++q) { yv[q] = ${y}; ${w_upd} ${epi} }
      ks_st_vec<VEC>(out + row * R + col, yv);
    }"""
    ).substitute(
        valid=valid, w_loads=w_loads, w_upd=w_upd, e_loads=_row_loads(roles.epilogue, "col", "e"), y=y,
        epi=epi_call("yv[q]", "q"),
    )


def _binding(spec: ReductionSpec, roles: _Roles, name: str, vec: int, nf: int, launcher_sig: str) -> str:
    n = len(spec.inputs)
    normalizing = spec.kind in NORMALIZING
    checks = "\n  ".join(
        f'ks_check_tensor(in_{k}, "{name}: input {k} ({t.name})", {TORCH_DTYPE[t.dtype]}, device);'
        for k, t in enumerate(spec.inputs)
    )
    shapes = ", ".join("os" if k in roles.epilogue else "xs" for k in range(n))
    ptrs = ", ".join(f"&in_{k}" for k in range(n))
    row_read = list(roles.prologue) + [k for k in (roles.weight, roles.bias) if k is not None]
    if normalizing:
        row_read += list(roles.epilogue)
    row_read = ", ".join(str(k) for k in row_read)
    cols_replan = ""
    if normalizing and spec.kind not in COLUMN_TILE_KINDS:  # no column-tile kernel to launch
        cols_replan = f"""
  if (plan.path == KS_PATH_COLS) plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {nf}, normalizing, rows32, true);"""
    if spec.kind == "layer_norm":
        view = f"""  TORCH_CHECK(nd >= {spec.norm_ndim}, "{name}: layer_norm over {spec.norm_ndim} dims of a ", ks_str(nd), "-d tensor");
  const int64_t split = nd - {spec.norm_ndim};
  for (int64_t k = 0; k < split; ++k) outer *= x_sizes[k];
  for (int64_t k = split; k < nd; ++k) R *= x_sizes[k];
  out_shape = x_sizes;"""
    else:
        reduce_shape = (
            "out_shape = x_sizes;"
            if normalizing
            else ("out_shape = x_sizes; out_shape[dim] = 1;" if spec.keepdim else
                  "out_shape = x_sizes; out_shape.erase(out_shape.begin() + dim);")
        )
        view = f"""  int64_t dim = {spec.dim};
  if (nd == 0) {{
    TORCH_CHECK(dim == 0 || dim == -1, "{name}: dim ", ks_str(dim), " out of range for a 0-d tensor");
  }} else {{
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "{name}: dim {spec.dim} out of range for a ", ks_str(nd), "-d tensor");
    for (int64_t k = 0; k < dim; ++k) outer *= x_sizes[k];
    R = x_sizes[dim];
    for (int64_t k = dim + 1; k < nd; ++k) inner *= x_sizes[k];
    {reduce_shape}
  }}"""
    return f"""
// ---- binding {name}: {spec.kind} ----
at::Tensor {name}({", ".join(f"at::Tensor in_{k}" for k in range(n))}) {{
  TORCH_CHECK(in_0.is_cuda(), "{name}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {checks}
  const std::vector<int64_t> x_sizes(in_0.sizes().begin(), in_0.sizes().end());
  const int64_t nd = (int64_t)x_sizes.size();
  int64_t outer = 1, R = 1, inner = 1;
  std::vector<int64_t> out_shape;
{view}
  const c10::cuda::CUDAGuard guard(device);  // after validation: errors throw before it
  at::Tensor out = at::empty(out_shape, in_0.options().dtype({TORCH_DTYPE[spec.out_dtype]}));
  if (out.numel() == 0) return out;
  TORCH_CHECK(R > 0, "{name}: reduction over an empty dimension");
  const bool normalizing = {"true" if normalizing else "false"};
  const bool rows32 = {"true" if spec.kind in ROWS32_KINDS else "false"};
  const int sms = ks_sm_count(), smem_optin = ks_smem_optin();
  KsRedPlan plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {nf}, normalizing, rows32, false);{cols_replan}
  const c10::IntArrayRef xs(x_sizes), os(out_shape);
  (void)os;
  KsOperand descs[{n}];
  auto row_path = [&]() {{ return plan.path == KS_PATH_ROW_WARP || plan.path == KS_PATH_ROW_BLOCK; }};
  // 16-byte operands where the path reads them so: rows (R % vec) or the column kernels (inner).
  const int want = ((row_path() && R % {vec} == 0) || (plan.path == KS_PATH_COLS && inner % {vec} == 0)) ? {vec} : 1;
  int vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, want, descs);
  // Row kernels read only row-affine layouts (full rows, row vectors, per-row values): try the
  // scalar width (rows of any length), else take the tile path.
  const int row_read[] = {{{row_read}}};
  auto row_affine = [&]() {{
    for (int k : row_read) if (!ks_row_affine(descs[k], R)) return false;
    return true;
  }};
  if (row_path() && vec > 1 && !row_affine()) vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  if (row_path() && !row_affine()) {{
    plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {nf}, normalizing, rows32, true);
    vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  }}
  // The block path's scalar kernel caches KS_BLOCK_SCALAR_VALUES per thread, not 32: with 32
  // scalar loads in flight under the 512-thread register bound, ptxas spilled.  More threads
  // per row, or the tile path for rows longer than 512 x that.
  if (plan.path == KS_PATH_ROW_BLOCK && vec == 1) {{
    const int64_t tx = ks_pow2_ceil(ks_cdiv(R, KS_BLOCK_SCALAR_VALUES));
    if (tx <= 512) plan.threads_x = (int)(tx > 32 ? tx : 32);
    else plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {nf}, normalizing, rows32, true);
  }}
  at::Tensor workspace;
  float* ws = nullptr;
  if (plan.workspace_floats > 0) {{
    workspace = at::empty({{plan.workspace_floats}}, in_0.options().dtype(at::kFloat));
    ws = workspace.data_ptr<float>();
  }}
  const void* ins[{n}] = {{{", ".join(f"in_{k}.data_ptr()" for k in range(n))}}};
  {name}_launch(ins, descs, out.data_ptr(), ws, outer, R, inner, plan, vec,
      c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}}
"""
