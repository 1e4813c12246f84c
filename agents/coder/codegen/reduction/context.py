"""What every kernel family of one reduction spec shares: the operand roles, the spec's values
(state type, vector width, storage type), the per-operand code fragments (loads, prologue and
epilogue calls, layer_norm's affine) and the statistics over cached values that the row and
column-tile kernels both compute."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    check_identifier,
    operand_args,
    operand_params,
    vector_width,
)
from kernelstitch.agents.coder.codegen.expr import DeviceFunction, c_float, compile_ops
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import NORMALIZING_KINDS, ReductionSpec

NORMALIZING = NORMALIZING_KINDS
# Kinds with a column-tile kernel (a strided reduced dim).  layer_norm has none: it always reduces
# trailing dims (inner == 1), and the binding sends any other plan to the tile path.
COLUMN_TILE_KINDS = frozenset({"softmax", "log_softmax"})
# Kinds with the 32-value row kernel on <= 256 threads under a 64-register cap (ks_plan_reduction's
# rows32): layer_norm's weight and bias loads spilled there.
ROWS32_KINDS = frozenset({"softmax", "log_softmax"})
STATE = {
    "sum": "KsStateSum", "mean": "KsStateSum", "amax": "KsStateMax", "amin": "KsStateMin",
    "logsumexp": "KsStateLse", "softmax": "KsStateLse", "log_softmax": "KsStateLse",
    "layer_norm": "KsStateWelford", "group_norm": "KsStateWelford",
}
STATE_FLOATS = {"KsStateSum": 1, "KsStateMax": 1, "KsStateMin": 1, "KsStateLse": 2, "KsStateWelford": 3}
ROW_OP = {"sum": "KsOpSum", "mean": "KsOpSum", "amax": "KsOpMax", "amin": "KsOpMin"}

# Reduced value -> stored scalar (reduce kinds), from the online state `st`.
FINALIZE_SCALAR = {
    "sum": "const float acc = st.a;",
    "mean": "const float acc = ks_div_norm(st.a, (float)R);",
    "amax": "const float acc = st.a;",
    "amin": "const float acc = st.a;",
    "logsumexp": "const float acc = st.m == -KS_INF ? -KS_INF : st.m + logf(st.s);",
}
# x -> y with the statistics s0, s1 of the tile path (two floats per row/column).
NORMALIZE = {
    "softmax": "expf(x - s0) / s1",
    "log_softmax": "x - s0 - s1",
    "layer_norm": "(x - s0) * s1",
    "group_norm": "(x - s0) * s1",
}


# group_norm is layer_norm over rows of channel groups: the same statistics and normalisation
# (only its view of the tensor and its per-channel affine differ, in the binding).
_STATS_KIND = {"group_norm": "layer_norm"}
AFFINE_KINDS = frozenset({"layer_norm", "group_norm"})


def finalize_stats(kind: str, eps: float) -> str:
    """Statistics (normalising kinds) from the online state `st`."""
    return {
        "softmax": "const float s0 = st.m == -KS_INF ? 0.f : st.m, s1 = st.s;",
        "log_softmax": "const float s0 = st.m == -KS_INF ? 0.f : st.m, s1 = logf(st.s);",
        "layer_norm": f"const float s0 = st.mean, s1 = rsqrtf(ks_div_norm(st.m2, st.n) + {c_float(eps)});",
    }[_STATS_KIND.get(kind, kind)]


def cached_normalize(kind: str, val: str) -> str:
    """y from a cached value `val` and the statistics of `cached_stats`."""
    return {
        "softmax": f"ks_div_norm({val}, s)",  # the cache holds exp(x - max) by then
        "log_softmax": f"{val} - ms - logs",
        "layer_norm": f"({val} - mean) * rstd",
    }[_STATS_KIND.get(kind, kind)]


@dataclass(frozen=True)
class ReductionVariant:
    """Design knobs the microbenchmarks vary (bench/microbench/*_gen.py).  The defaults are what
    the coder emits; a plan step's ReductionKnobs (varied by the measured search) set `row_exp`,
    `cluster` and `batched_loads`."""

    row_exp: str = "expf"  # the row kernels' exp(x - max) of softmax sums ("__expf": fast math)
    cluster: bool = True  # strided softmax kinds try thread-block clusters before column tiles
    cluster_fast_math: bool = True  # __expf, fmaxf and a reciprocal (see cluster_cols.py)
    cluster_min_blocks: int | None = None  # None: cluster_cols.py's choice; 0: no minimum
    cluster_full_loads: bool = True  # contiguous operands take the plain 16-byte loads (FULL)
    batched_loads: bool = True  # group_norm's channels-last apply: every slot's load first (gn_nhwc.cu)
    colloop_tail_batch: bool = False  # the column loop's last R % 8 values in one batch (colloop.cu)


@dataclass(frozen=True)
class Roles:
    """Which `inputs` feed the prologue, the layer_norm affine, and the epilogue."""

    prologue: tuple[int, ...]
    weight: int | None
    bias: int | None
    epilogue: tuple[int, ...]


def roles_of(spec: ReductionSpec) -> Roles:
    names = [t.name for t in spec.inputs]
    if not names:
        raise ValueError(f"{spec.name}: a reduction needs at least one input")
    if len(set(names)) != len(names):
        raise ValueError(f"{spec.name}: duplicate input names {names}")
    for n in list(spec.epilogue_inputs) + [spec.weight, spec.bias]:
        if n is not None and n not in names:
            raise ValueError(f"{spec.name}: {n!r} is not one of the inputs {names}")
    if (spec.weight or spec.bias) and spec.kind not in AFFINE_KINDS:
        raise ValueError(f"{spec.name}: weight/bias are only for layer_norm and group_norm")
    if spec.dim_count < 1 or (spec.dim_count > 1 and spec.kind in NORMALIZING):
        raise ValueError(f"{spec.name}: dim_count {spec.dim_count} (only reduce kinds span several dims)")
    if spec.kind == "group_norm" and spec.groups < 1:
        raise ValueError(f"{spec.name}: group_norm needs groups >= 1, got {spec.groups}")
    special = set(spec.epilogue_inputs) | {spec.weight, spec.bias}
    prologue = tuple(k for k, n in enumerate(names) if n not in special)
    if not prologue or prologue[0] != 0:
        raise ValueError(f"{spec.name}: inputs[0] must be the reduced tensor (a prologue input)")
    return Roles(
        prologue=prologue,
        weight=names.index(spec.weight) if spec.weight else None,
        bias=names.index(spec.bias) if spec.bias else None,
        epilogue=tuple(names.index(n) for n in spec.epilogue_inputs),
    )


def loads(ks: tuple[int, ...], width: str, index: str, prefix: str = "a") -> str:
    """Operand loads into `{prefix}{k}[width]` at linear index `index` (any layout)."""
    return " ".join(f"float {prefix}{k}[{width}]; ks_load<{width}>(p{k}, d{k}, {index}, {prefix}{k});" for k in ks)


def column_bases(ks: list[int] | tuple[int, ...]) -> str:
    """Column kernels (colloop, tile): each operand's offset at r = 0 of the thread's column
    (flat index `base`) and its step per r, used when the kernel's AFFINE flag is set (the host's
    ks_col_affine held for every operand)."""
    return " ".join(f"const int64_t cb{k} = AFFINE ? ks_offset(d{k}, base) : 0, cs{k} = AFFINE ? ks_col_step(d{k}, inner) : 0; "
                    f"(void)cb{k}; (void)cs{k};" for k in ks)


def column_loads(ks: tuple[int, ...], prefix: str) -> str:
    """One value of each operand at r = rr (flat index idx): column base + rr * step when AFFINE,
    else through the descriptor."""
    return " ".join(f"float {prefix}{k}[1]; if constexpr (AFFINE) {prefix}{k}[0] = ks_ld(p{k} + (cb{k} + rr * cs{k})); "
                    f"else ks_load<1>(p{k}, d{k}, idx, {prefix}{k});" for k in ks)


def full_or_described_loads(ks: tuple[int, ...], prefix: str) -> str:
    """VEC-wide loads at `idx`: plain 16-byte loads when the kernel's FULL flag says every operand
    is a contiguous full-size tensor, else through the descriptors."""
    return " ".join(
        f"float {prefix}{k}[VEC]; if constexpr (FULL) ks_ld_vec<VEC>(p{k} + idx, {prefix}{k}); "
        f"else ks_load<VEC>(p{k}, d{k}, idx, {prefix}{k});" for k in ks)


def row_loads(ks: tuple[int, ...], col: str, prefix: str = "a", any_layout: bool = False) -> str:
    """Row-kernel loads of VEC elements at `col` of the current row (bases b{k} set per row);
    `any_layout`: group_norm's loads of operands that vary inside a row (ks_load_row_any)."""
    if any_layout:
        return " ".join(f"float {prefix}{k}[VEC]; ks_load_row_any<VEC>(p{k}, d{k}, b{k}, row * R, {col}, {prefix}{k});"
                        for k in ks)
    return " ".join(f"float {prefix}{k}[VEC]; ks_load_row<VEC>(p{k}, d{k}, b{k}, {col}, {prefix}{k});" for k in ks)


def row_any_layout(kind: str) -> bool:
    """Row kernels of this kind read operands of any layout but general strides: group_norm,
    whose rows span channels (its affine and a conv bias in its prologue vary inside a row)."""
    return kind == "group_norm"


@dataclass(frozen=True)
class Reduction:
    """One spec, checked, with the values and fragments its kernel families share."""

    spec: ReductionSpec
    name: str
    kind: str
    roles: Roles
    normalizing: bool
    state: str  # the online state type of the tile path (KsState*)
    nf: int  # floats per partial state
    vec: int  # elements per 16-byte access
    out_t: str  # the output's storage type
    pro: DeviceFunction  # prologue: the prologue inputs -> the reduced value
    epi: DeviceFunction  # epilogue: (acc, epilogue inputs) -> the stored value
    params: str  # kernel parameters shared by every kernel: operands in `inputs` order
    args: str  # the launcher's arguments for them

    @classmethod
    def of(cls, spec: ReductionSpec) -> Reduction:
        name = check_identifier(spec.name)
        if spec.kind not in STATE:
            raise ValueError(f"{name}: unknown reduction kind {spec.kind!r}")
        roles = roles_of(spec)
        in_names = [t.name for t in spec.inputs]
        pro_out = spec.prologue_out or (spec.prologue[-1].out if spec.prologue else in_names[0])
        return cls(
            spec=spec, name=name, kind=spec.kind, roles=roles, normalizing=spec.kind in NORMALIZING,
            state=STATE[spec.kind], nf=STATE_FLOATS[STATE[spec.kind]],
            vec=vector_width([t.dtype for t in spec.inputs] + [spec.out_dtype]),
            out_t=CUDA_TYPE[spec.out_dtype],
            pro=compile_ops(f"{name}_pro", tuple(in_names[k] for k in roles.prologue), spec.prologue, (pro_out,)),
            epi=compile_ops(f"{name}_epi", ("acc",) + tuple(in_names[k] for k in roles.epilogue), spec.epilogue,
                            (spec.epilogue_out,)),
            params=operand_params(spec.inputs),
            args=operand_args(spec.inputs),
        )

    def pro_call(self, dest: str, first: str = "a0[q]") -> str:
        """The prologue into `dest`, from a{k}[q] (already loaded; the reduced tensor's value
        `first`)."""
        args = [first] + [f"a{k}[q]" for k in self.roles.prologue[1:]]
        return f"{self.name}_pro({', '.join(args)}, {dest});"

    def epi_call(self, value: str, q: str) -> str:
        """The epilogue in place on `value`, from e{k}[q] (already loaded)."""
        args = [value] + [f"e{k}[{q}]" for k in self.roles.epilogue] + [value]
        return f"{self.name}_epi({', '.join(args)});"

    def affine(self, width: str, index: str, value: str, q: str) -> tuple[str, str]:
        """layer_norm weight/bias: (load statements, in-place update)."""
        loaded, upd = [], []
        row = width != "1"

        def load(k: int) -> str:
            return row_loads((k,), index, "w", row_any_layout(self.kind)) if row else loads((k,), width, index, "w")

        if self.roles.weight is not None:
            loaded.append(load(self.roles.weight))
            upd.append(f"{value} *= w{self.roles.weight}[{q}];")
        if self.roles.bias is not None:
            loaded.append(load(self.roles.bias))
            upd.append(f"{value} += w{self.roles.bias}[{q}];")
        return " ".join(loaded), " ".join(upd)

    def store_scalar(self, oidx: str) -> str:
        """Epilogue and store of the reduced value `acc` at output index `oidx`."""
        return (
            f"{{ float y = acc; {loads(self.roles.epilogue, '1', oidx, 'e')} {self.epi_call('y', '0')} "
            f"out[{oidx}] = ks_from_float<{self.out_t}>(y); }}"
        )

    def final_block(self, col: str) -> str:
        """Inside the tile/finalize kernels: state `st` for output column `col`."""
        if self.normalizing:
            return f"{finalize_stats(self.kind, self.spec.eps)} stats[2 * {col}] = s0; stats[2 * {col} + 1] = s1;"
        return f"{FINALIZE_SCALAR[self.kind]} {self.store_scalar(col)}"

    def row_operands(self) -> list[int]:
        """The operands the row kernels read per row: prologue, affine, and (normalising kinds,
        which store from the row kernel) epilogue inputs."""
        ks = list(self.roles.prologue) + [k for k in (self.roles.weight, self.roles.bias) if k is not None]
        if self.normalizing:
            ks += list(self.roles.epilogue)
        return ks

    def column_operands(self) -> list[int]:
        """The operands the column-loop kernel reads per value: prologue, and (normalising
        kinds, which store every value) epilogue inputs; its host plan checks they are
        column-affine (ks_col_affine)."""
        return list(self.roles.prologue) + (list(self.roles.epilogue) if self.normalizing else [])


@dataclass(frozen=True)
class Cache:
    """Where a kernel keeps the values it reduces: `each(body)` runs `body` for every valid
    cached value, which the body reads and may overwrite as `val`; `allreduce(op, x)` combines
    x over the threads that share the reduced range."""

    each: Callable[[str], str]
    val: str
    allreduce: Callable[[str, str], str]


def row_cache(valid: str) -> Cache:
    """Row kernels: registers v[MAXV][VEC]; slot j holds columns (j * TX + tx) * VEC + q."""
    return Cache(
        each=lambda body: render("reduction/each_row.cu", valid=valid, body=body),
        val="v[j][q]",
        allreduce=lambda op, x: f"ks_row_allreduce<{op}, WARP>({x}, smem, lanes)",
    )


COLS_CACHE = Cache(  # column-tile kernel: shared memory tile[R][TX], thread (tx, ty) walks r = ty + k * TY
    each=lambda body: render("reduction/each_cols.cu", body=body),
    val="tile[r * TX + tx]",
    allreduce=lambda op, x: f"ks_col_allreduce<{op}>({x}, part, res)",
)


def cached_stats(kind: str, cache: Cache, eps: float, exp: str = "expf") -> str:
    """Statistics of cached values, declared for the store code that follows.  softmax kinds:
    max, then sum of `exp` (softmax overwrites the cache with the exponentials); layer_norm: mean,
    then squared deviations (two-pass over the cache, not Welford)."""
    v = cache.val
    if kind in AFFINE_KINDS:
        return render(
            "reduction/stats_layer_norm.cu", eps=c_float(eps),
            each_sum=cache.each(f"s += {v};"), sum=cache.allreduce("KsOpSum", "s"),
            each_square=cache.each(f"const float d = {v} - mean; ss += d * d;"),
            square_sum=cache.allreduce("KsOpSum", "ss"),
        )
    keep = f" {v} = e;" if kind == "softmax" else ""
    return render(
        "reduction/stats_lse.cu",
        each_max=cache.each(f"m = ks_max(m, {v});"), max=cache.allreduce("KsOpMax", "m"),
        each_exp=cache.each(f"const float e = {exp}({v} - ms); s += e;{keep}"), sum=cache.allreduce("KsOpSum", "s"),
        logs="" if kind == "logsumexp" else "    const float logs = logf(s); (void)logs;\n",
    )
