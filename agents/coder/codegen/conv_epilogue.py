"""Direct convolution + epilogue emitter (cuda/conv_epilogue/): a 2-D convolution of few input
channels computed in fp32 FMAs, then, from the accumulators read back from shared memory, either
an elementwise chain (one store of each
of its outputs) or a pooling whose windows tile the block (its prologue, the window's max or
mean, its epilogue: one store a window).

The geometry (kernel, stride, padding, pooling window) and the staged input-channel count are
compiled in; the batch, channel and spatial sizes are read at run time.  The chains are
`compile_ops` device functions, their inputs other than the convolution's output read through the
same run-time descriptors (`KsOperand`) as the elementwise kernels: against the convolution's
output (elementwise inputs, a pool's prologue inputs) or the pooled output (a pool's epilogue).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelstitch.agents.coder.codegen.common import CUDA_TYPE, TORCH_DTYPE, check_identifier
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    CONV_EPILOGUE_COLS,
    CONV_EPILOGUE_ROWS,
    CONV_EPILOGUE_SMEM,
    CONV_EPILOGUE_WARPS,
    ConvEpilogueSpec,
    ElementwiseSpec,
    PoolSpec,
    conv_epilogue_pools,
    conv_epilogue_staged_channels,
)

_JOIN = "\n      "


# The persistent kernel's shared memory (weights, two input tiles, the accumulators) must leave
# room for 3 blocks an SM (the register bound's): H100's 227 KB, 1 KB a block reserved.
_PERSISTENT_SMEM_MAX = 227 * 1024 // 3 - 1024


def _pitch(spec: ConvEpilogueSpec, vector_copy: bool) -> int:
    """Floats a staged input row takes: its width, rounded up to 4 for 16-byte copies."""
    iw = (CONV_EPILOGUE_COLS - 1) * spec.stride[1] + spec.kernel[1]
    return -(-iw // 4) * 4 if vector_copy else iw


def _staged_floats(spec: ConvEpilogueSpec, pitch: int) -> tuple[int, int]:
    """(weights, one input tile) in floats for the staged channels, input rows of `pitch` floats."""
    (kh, kw), (sh, _) = spec.kernel, spec.stride
    ih = (CONV_EPILOGUE_ROWS - 1) * sh + kh
    return spec.ci_tile * kh * kw * (8 * CONV_EPILOGUE_WARPS + 4), spec.ci_tile * ih * pitch


def vector_copy_fits(spec: ConvEpilogueSpec) -> bool:
    """Whether the 16-byte row copies can take `spec`: a padded row of at most 32 chunks, and the
    padded input tile and weights of its staged channels still within the block-a-tile kernel's
    static shared memory (its sizing, kernel_spec.conv_epilogue_staged_channels, counts unpadded
    rows)."""
    pitch = _pitch(spec, True)
    return pitch <= 128 and 4 * sum(_staged_floats(spec, pitch)) <= CONV_EPILOGUE_SMEM


def persistent_smem(spec: ConvEpilogueSpec, vector_copy: bool = False) -> int:
    """Bytes of shared memory the persistent kernel of `spec` takes."""
    weights, tile = _staged_floats(spec, _pitch(spec, vector_copy))
    return 4 * (weights + 2 * tile + CONV_EPILOGUE_WARPS * 8 * CONV_EPILOGUE_ROWS * CONV_EPILOGUE_COLS)


def emit_conv_epilogue(spec: ConvEpilogueSpec, persistent: bool = True, vector_copy: bool = False) -> KernelSource:
    """The kernels of `spec`.  persistent=False launches the block-a-tile kernel for every C_in;
    by default C_in <= spec.ci_tile runs the persistent one where its shared memory fits 3 blocks
    an SM (bench/conv_epilogue_timing.py times the two).  vector_copy=True: the persistent
    kernel copies input rows in 16-byte pieces where their alignment allows (staged rows padded
    to a multiple of 4 floats; W and the tile's first column multiples of 4, so never with a
    padding of 1 or 2 columns; where vector_copy_fits); written 2026-12-07 after the last GPU
    call, not yet run on a GPU, so off by default (the timing script's `direct_vec` form)."""
    name = check_identifier(spec.name)
    epi = spec.epilogue
    (kh, kw), (sh, sw), (ph, pw) = spec.kernel, spec.stride, spec.padding
    if spec.x.dtype != "float32" or spec.weight.dtype != "float32":
        raise ValueError(f"{name}: the direct convolution reads float32 input and weight")
    if kh < 1 or kw < 1 or sh < 1 or sw < 1 or ph < 0 or pw < 0:
        raise ValueError(f"{name}: invalid geometry {spec.kernel} / {spec.stride} / {spec.padding}")
    if not 0 <= spec.operand < len(epi.inputs):
        raise ValueError(f"{name}: the epilogue's operand {spec.operand} is not one of its inputs")
    if not 1 <= spec.ci_tile <= conv_epilogue_staged_channels(spec.kernel, spec.stride, spec.ci_tile):
        raise ValueError(f"{name}: {spec.ci_tile} staged input channels do not fit the block's shared memory")
    if isinstance(epi, PoolSpec):
        store = _pool_store(name, spec, epi)
    else:
        store = _elementwise_store(name, spec)
    others = [k for k in range(len(epi.inputs)) if k != spec.operand]
    out_t = CUDA_TYPE[epi.out_dtype]
    params = [f"const {CUDA_TYPE[epi.inputs[k].dtype]}* __restrict__ in{k}, const __grid_constant__ KsOperand d{k}"
              for k in others] + [f"{out_t}* __restrict__ out{k}" for k in range(store.nout)]
    launcher_sig = (
        f"void {name}_launch(const float* x, const float* w, "
        + "".join(f"const void* in{k}, KsOperand d{k}, " for k in others)
        + "".join(f"void* out{k}, " for k in range(store.nout))
        + "int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Co, int64_t Ho, int64_t Wo, cudaStream_t stream)")
    kernel_args = "".join(f"static_cast<const {CUDA_TYPE[epi.inputs[k].dtype]}*>(in{k}), d{k}, " for k in others)
    kernel_args += "".join(f"static_cast<{out_t}*>(out{k}), " for k in range(store.nout))
    store_params = "".join(f", const {CUDA_TYPE[epi.inputs[k].dtype]}* __restrict__ in{k}, const KsOperand& d{k}"
                           for k in others) + "".join(f", {out_t}* __restrict__ out{k}" for k in range(store.nout))
    store_args = "".join(f", in{k}, d{k}" for k in others) + "".join(f", out{k}" for k in range(store.nout))
    vector_copy = vector_copy and vector_copy_fits(spec)
    persistent = persistent and persistent_smem(spec, vector_copy) <= _PERSISTENT_SMEM_MAX
    cuda = render(
        "conv_epilogue/kernel.cu", name=name, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw, ci_tile=spec.ci_tile,
        warps=CONV_EPILOGUE_WARPS, rows=CONV_EPILOGUE_ROWS, cols=CONV_EPILOGUE_COLS,
        device_fn=store.device_fn, params="".join(p + ", " for p in params), store=store.text,
        launcher_sig=launcher_sig, kernel_args=kernel_args, store_params=store_params, store_args=store_args,
        persistent="true" if persistent else "false", pitch=_pitch(spec, vector_copy),
        vector_copy="true" if vector_copy else "false")

    # the binding: operands checked and described against the conv output (s) or the pooled one (sp)
    checks = "\n  ".join(
        f'ks_check_tensor(in_{k}, "{name}: epilogue input {k} ({epi.inputs[k].name})", '
        f'{TORCH_DTYPE[epi.inputs[k].dtype]}, device);' for k in others)
    shape_checks = "\n  ".join(
        f'TORCH_CHECK(ks_broadcasts_to(in_{k}, {store.shapes[k]}), "{name}: operand {k} ({epi.inputs[k].name}) of shape ", '
        f'ks_str(in_{k}.sizes()), " does not broadcast to ", ks_str({store.shapes[k]}));' for k in others)
    describe = "\n  ".join(f"ks_describe(in_{k}, {store.shapes[k]}, 1, descs[{j}]);  // may materialise it: pointers after"
                           for j, k in enumerate(others))
    launch_args = "".join(f"in_{k}.data_ptr(), descs[{j}], " for j, k in enumerate(others))
    launch_args += "".join(f"out_{k}.data_ptr(), " for k in range(store.nout))
    if store.nout == 1:
        ret_type, ret = "at::Tensor", "out_0"
    else:
        ret_type, ret = "std::vector<at::Tensor>", "{" + ", ".join(f"out_{k}" for k in range(store.nout)) + "}"
    out_shape = "sp" if isinstance(epi, PoolSpec) else "s"
    binding = render(
        "conv_epilogue/binding.cpp", name=name, kh=kh, kw=kw, sh=sh, sw=sw, ph2=2 * ph, pw2=2 * pw,
        returns="one tensor" if store.nout == 1 else f"{store.nout} tensors", ret_type=ret_type, ret=ret,
        cparams=", ".join(["at::Tensor x", "at::Tensor weight", *(f"at::Tensor in_{k}" for k in others)]),
        x_name=spec.x.name, w_name=spec.weight.name, checks=checks, shape_checks=shape_checks,
        pooled=store.pooled_shape, what=store.what,
        outs_alloc="\n  ".join(f"at::Tensor out_{k} = at::empty({out_shape}, x.options().dtype({TORCH_DTYPE[epi.out_dtype]}));"
                               for k in range(store.nout)),
        ndesc=max(1, len(others)), describe=describe, launch_args=launch_args)
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=(spec.x.name, spec.weight.name, *(epi.inputs[k].name for k in others)),
        notes=(f"a {kh} x {kw} convolution computed directly in fp32 (input tile and 32 output channels' "
               f"weights in shared memory, 8 channels x 8 rows a thread), {store.what} applied in registers: "
               "the convolution's output never stored",
               "operands through run-time descriptors, those constant along a plane loaded once"),
    )


@dataclass(frozen=True)
class _Store:
    """The kernel's store block for one kind of epilogue, and what the binding needs of it."""

    text: str  # the rendered block (kernel.cu's {{store}})
    device_fn: str  # the device functions it calls
    nout: int
    shapes: dict[int, str]  # operand index -> the binding's shape it is described against
    pooled_shape: str  # the binding's line defining sp (the pooled output's shape), or ""
    what: str


def _operand_values(others: list[int], operand: int, inputs: range | list[int]) -> tuple[str, str, str]:
    """(lane_hoists, hoists, loads): operand k's value for the conv output index idx (plane orow,
    position s): constant along the plane (h), at b + s (full, or rows of the plane), else through
    its descriptor; the convolution's output `operand` is the accumulator.  Each of the warp's 8
    channels' plane base and constant is found once, by lane (channel) l < 8 in parallel
    (lane_hoists: integer divisions, serial in every thread they were a third of the kernel's
    stall samples, ncu s32), and taken by the channel loop with shuffles (hoists)."""
    lane_hoists = "\n  ".join(
        ["const int64_t orow_l = n * Co + min(oc0 + warp * 8 + (lane & 7), Co - 1);  // lane l: channel l's plane"]
        + [f"const int64_t lb{k} = d{k}.mode == KS_STRIDED ? -1 : ks_row_base_any(d{k}, orow_l, S); "
           f"const int lh{k} = lb{k} >= 0 && d{k}.mode != KS_FULL && d{k}.mode != KS_ROW; "
           f"const float lv{k} = lh{k} ? ks_ld(in{k} + lb{k}) : 0.f;" for k in others]) if others else ""
    hoists = _JOIN.join(
        f"const int64_t b{k} = __shfl_sync(0xffffffffu, lb{k}, i); const bool h{k} = __shfl_sync(0xffffffffu, lh{k}, i); "
        f"const float v{k} = __shfl_sync(0xffffffffu, lv{k}, i);" for k in others)
    loads = _JOIN.join(
        f"float a{k}[1] = {{ap[j * COLS]}};" if k == operand else
        f"float a{k}[1]; if (PLANE || h{k}) a{k}[0] = v{k}; else if (b{k} >= 0) a{k}[0] = ks_ld(in{k} + b{k} + s); "
        f"else a{k}[0] = ks_ld(in{k} + ks_row_any_offset(d{k}, idx));" for k in inputs)
    return lane_hoists, hoists, loads


def _all_plane(others: list[int]) -> str:
    """The condition (uniform across the warp) under which every operand but the accumulator is
    constant along the channel's plane: the stores' loops then take them from registers
    (their PLANE instance; a branch an operand and value otherwise)."""
    return " && ".join(f"h{k}" for k in others) or "true"


def _elementwise_store(name: str, spec: ConvEpilogueSpec) -> _Store:
    ew = spec.epilogue
    assert isinstance(ew, ElementwiseSpec)
    if not ew.outputs:
        raise ValueError(f"{name}: the elementwise epilogue stores nothing")
    nin, nout = len(ew.inputs), len(ew.outputs)
    others = [k for k in range(nin) if k != spec.operand]
    fn = compile_ops(f"{name}_f", tuple(t.name for t in ew.inputs), ew.ops, ew.outputs)
    lane_hoists, hoists, loads = _operand_values(others, spec.operand, range(nin))
    out_t = CUDA_TYPE[ew.out_dtype]
    text = render(
        "conv_epilogue/store_elementwise.cu", name=name, lane_hoists=lane_hoists, hoists=hoists, loads=loads,
        all_plane=_all_plane(others),
        outs=" ".join(f"float r{k}[1];" for k in range(nout)),
        call_args=", ".join([f"a{k}[0]" for k in range(nin)] + [f"r{k}[0]" for k in range(nout)]),
        stores=" ".join(f"out{k}[idx] = ks_from_float<{out_t}>(r{k}[0]);" for k in range(nout)))
    return _Store(text, fn.source, nout, {k: "s" for k in others}, "", "the elementwise chain")


def _pool_store(name: str, spec: ConvEpilogueSpec, pool: PoolSpec) -> _Store:
    if not conv_epilogue_pools(pool) or spec.operand != 0:
        raise ValueError(f"{name}: the pooling ({pool.kind} {pool.kernel} / {pool.stride} / {pool.padding}) "
                         "does not tile the direct kernel's block")
    names = [t.name for t in pool.inputs]
    epilogue = [names.index(n) for n in pool.epilogue_inputs]
    prologue = [k for k in range(len(names)) if k not in epilogue]  # tap and plane operands, 0 first
    pro_out = pool.prologue_out or (pool.prologue[-1].out if pool.prologue else names[0])
    pro = compile_ops(f"{name}_pro", tuple(names[k] for k in prologue), pool.prologue, (pro_out,))
    epi = compile_ops(f"{name}_epi", ("acc",) + tuple(names[k] for k in epilogue), pool.epilogue,
                      (pool.epilogue_out,))
    plane = [k for k in prologue if k != 0]
    lane_hoists, hoists, loads = _operand_values(plane, 0, prologue)
    pkh, pkw = pool.kernel
    divisor = pool.divisor or pkh * pkw
    combine = "ks_max(m, v[0])" if pool.kind == "max" else "m + v[0]"
    text = render(
        "conv_epilogue/store_pool.cu", name=name, pkh=pkh, pkw=pkw, kind=pool.kind, lane_hoists=lane_hoists,
        hoists=hoists, loads=loads, all_plane=_all_plane(plane),
        init="-INFINITY" if pool.kind == "max" else "0.f", combine=combine,
        combine_o="ks_max(m, o)" if pool.kind == "max" else "m + o",
        finish="m" if pool.kind == "max" else f"m / {divisor}.f",
        pro_args=", ".join([f"a{k}[0]" for k in prologue] + ["v[0]"]),
        epi_loads=_JOIN.join(f"const float e{k} = ks_ld(in{k} + ks_row_any_offset(d{k}, pidx));" for k in epilogue),
        epi_args=", ".join(["acc_v", *(f"e{k}" for k in epilogue), "r0[0]"]),
        out_t=CUDA_TYPE[pool.out_dtype])
    shapes = {k: ("sp" if k in epilogue else "s") for k in range(1, len(names))}
    pooled = (f"const std::vector<int64_t> pshape = {{N, Co, Ho / {pkh}, Wo / {pkw}}};  // floor mode\n"
              "  const c10::IntArrayRef sp(pshape);")
    return _Store(text, pro.source + "\n" + epi.source, 1, shapes, pooled,
                  f"its {pkh} x {pkw} {pool.kind} pooling")
