"""Elementwise emitter: one grid-stride pass computing every output of a fused op chain.

Two instantiations of one kernel template: VEC = 16 bytes of the narrowest dtype (float4 /
8 x half) when every full-size operand is 16-byte aligned, VEC = 1 otherwise (the binding decides
at run time).  Broadcast operands are read through run-time descriptors (`KsOperand`): full,
scalar, row vector, per-channel, or general strides.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    binding_operands,
    check_identifier,
    vector_width,
)
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    ElementwiseSpec,
)

THREADS = 256
_JOIN = "\n      "  # one statement per line at the kernels' loop-body indent
_JOIN_ROW = "\n    "  # ... and at the channels-last kernel's per-thread indent
_JOIN_DEEP = "\n            "  # ... and inside its tile loops


def emit_elementwise(spec: ElementwiseSpec, strided_vec: bool = True, tiled_any_dim: bool = False) -> KernelSource:
    """The kernels of `spec`.  strided_vec=True lets the vector kernel read an operand of general
    strides whose VEC consecutive elements are contiguous and 16-byte aligned (one offset per VEC
    elements, ks_load_strided_rows), where it otherwise sends the launch to the scalar kernel:
    level3/48's x[..., :, None] - x[..., None, :] wrote 537 MB at 0.43 TB/s through the scalar
    kernel on an H100 (bench/results/2026-12-07-h100-s37).  The default since its GPU test passed
    and bench/elementwise_strided_timing.py timed it on an H100 (bench/results/2026-12-07-h100-s38):
    level3/48's segsum 1.246 -> 0.420 ms, a row broadcast a + b[:, None, :] 0.415 -> 0.208
    (torch 1.483 and 0.245); strided_vec=False gives the scalar kernel such operands, as before.
    tiled_any_dim=True lets the tiled (channels-last) kernels take an operand stored transposed at
    any dim, not only channels-last (ks_tiled_operand in ks_binding.h: level3/48's Y_diag + Y_off
    reads an einsum output of innermost stride 64 through the scalar kernel at 1.5 TB/s on an
    H100); written 2026-12-07 (s38) without a GPU, off by default until
    bench/elementwise_tiled_timing.py and tests/test_elementwise_tiled_gpu.py have run."""
    name = check_identifier(spec.name)
    if not spec.inputs:
        raise ValueError(f"{name}: an elementwise kernel needs at least one tensor input")
    if not spec.outputs:
        raise ValueError(f"{name}: an elementwise kernel needs at least one output")
    nin, nout = len(spec.inputs), len(spec.outputs)
    vec = vector_width([t.dtype for t in spec.inputs] + [spec.out_dtype])
    fn = compile_ops(f"{name}_f", tuple(t.name for t in spec.inputs), spec.ops, spec.outputs)
    out_t = CUDA_TYPE[spec.out_dtype]
    in_types = [CUDA_TYPE[t.dtype] for t in spec.inputs]

    params = [f"const {ty}* __restrict__ in{k}, const __grid_constant__ KsOperand d{k}" for k, ty in enumerate(in_types)]
    params += [f"{out_t}* __restrict__ out{k}" for k in range(nout)]
    params.append("const int64_t n")

    load = "ks_load_strided_rows" if strided_vec else "ks_load"

    def step(width: str, index: str) -> str:
        call_args = [f"a{k}[j]" for k in range(nin)] + [f"r{k}[j]" for k in range(nout)]
        return render(
            "elementwise/step.cu", name=name, width=width, call_args=", ".join(call_args),
            loads=_JOIN.join(f"float a{k}[{width}]; {load}<{width}>(in{k}, d{k}, {index}, a{k});" for k in range(nin)),
            outs=_JOIN.join(f"float r{k}[{width}];" for k in range(nout)),
            stores=_JOIN.join(f"ks_st_vec<{width}>(out{k} + {index}, r{k});" for k in range(nout)),
        )

    kernel_args = [f"static_cast<const {ty}*>(ins[{k}]), descs[{k}]" for k, ty in enumerate(in_types)]
    kernel_args += [f"static_cast<{out_t}*>(outs[{k}])" for k in range(nout)]
    kernel_args.append("n")
    launcher_sig = (
        f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* const* outs, "
        f"int64_t n, int vec, cudaStream_t stream)"
    )
    nhwc_sig = (
        f"void {name}_launch_nhwc(const void* const* ins, const KsOperand* descs, void* const* outs, int tiled,\n"
        f"    int64_t N, int64_t C, int64_t S, cudaStream_t stream)"
    )

    nhwc_kernel, nhwc_launch = _channels_last_kernel(name, spec, params, kernel_args, out_t, nhwc_sig)
    cuda = render(
        "elementwise/kernel.cu", name=name, device_fn=fn.source, threads=THREADS, params=", ".join(params),
        step_vec=step("VEC", "i"), step_tail=step("1", "i"), nhwc_kernel=nhwc_kernel, launcher_sig=launcher_sig,
        vec=vec, kernel_args=", ".join(kernel_args), nhwc_launch=nhwc_launch,
    )

    if nout == 1:
        ret_type, ret = "at::Tensor", "out_0"
    else:
        ret_type, ret = "std::vector<at::Tensor>", "{" + ", ".join(f"out_{k}" for k in range(nout)) + "}"
    operands = binding_operands(name, spec.inputs)
    keep_layout = render(
        "elementwise/keep_channels_last.cpp", name=name, in_refs=operands["in_refs"],
        permuted=", ".join(f"ks_channels_to_last(in_{k}, nd)" for k in range(len(spec.inputs))),
    ) if spec.keep_channels_last and nout == 1 else ""
    binding = render(
        "elementwise/binding.cpp", name=name, returns="one tensor" if nout == 1 else f"{nout} tensors",
        ret_type=ret_type, ret=ret, nout=nout, vec=vec, tiled_ok=_tiled_condition(spec),
        strided_rows=", true" if strided_vec else "", tiled_any_dim="true" if tiled_any_dim else "false",
        keep_layout=keep_layout, **operands,
        outs_alloc="\n  ".join(
            f"at::Tensor out_{k} = at::empty(shape, in_0.options().dtype({TORCH_DTYPE[spec.out_dtype]}));"
            for k in range(nout)
        ),
        out_ptrs=", ".join(f"out_{k}.data_ptr()" for k in range(nout)),
    )
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=launcher_sig + ";\n" + nhwc_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            f"elementwise: {vec}-wide 16-byte vector path + scalar path chosen at run time by alignment",
            "grid-stride loop, grid sized from SM count x occupancy, 64-bit indices (32-bit division fast path)",
            "broadcast operands through run-time descriptors (full/scalar/row/channel/strided)",
            "a channels-last operand into the contiguous output: computed in the read layout (row-constant "
            "operands loaded once a thread), results written along S through 32x32 shared-memory tiles",
        ),
    )


# Shared memory of the channels-last kernel: one float tile set an output, 4224 bytes a 32 x 33
# tile; fewer tiles a block as outputs add up, none past the 48 KB of static shared memory.
_NHWC_MAX_OUTPUTS = 11


def nhwc_tiles(nout: int) -> int:
    """32 x 32 tiles a channels-last block moves along S, for `nout` outputs (<= 34 KB shared)."""
    return 4 if nout <= 2 else 2 if nout <= 4 else 1


def tiled_inputs(spec: ElementwiseSpec) -> tuple[int, ...]:
    """The inputs the channels-last path is instantiated for (the spec's choice, else all)."""
    if len(spec.outputs) > _NHWC_MAX_OUTPUTS:
        return ()
    if spec.tiled_inputs is None:
        return tuple(range(len(spec.inputs)))
    return tuple(k for k in spec.tiled_inputs if 0 <= k < len(spec.inputs))


def _tiled_condition(spec: ElementwiseSpec) -> str:
    """The binding's test that `tiled` names an operand with an instantiated tiled kernel."""
    ks = tiled_inputs(spec)
    if len(ks) == len(spec.inputs):
        return "tiled >= 0"
    return " || ".join(f"tiled == {k}" for k in ks) or "false"


def _channels_last_kernel(name: str, spec: ElementwiseSpec, params: list[str], kernel_args: list[str],
                          out_t: str, launcher_sig: str) -> tuple[str, str]:
    """Kernel + launcher for one full-size operand stored channels-last ([N, C, S...] logically,
    [N, S..., C] in memory, e.g. a cuDNN NHWC convolution's output) while the output is the
    contiguous [N, C, S...]: the chain is computed in the read layout (one lane a channel, so an
    operand constant along a row is loaded once a thread) and each 32 x 32 (spatial, channel)
    tile of results leaves along S through shared memory, so both sides are coalesced; a plain
    elementwise pass would read the operand 4 bytes per C-element stride.  TI, the tiled
    operand, is a template argument (cuda/elementwise/nhwc.cu)."""
    nin, nout = len(spec.inputs), len(spec.outputs)
    tiles = nhwc_tiles(nout)
    # Row (n, c) bases of the operands read through descriptors (KS_STRIDED has none: -1, per element).
    bases = _JOIN_ROW.join(f"const int64_t b{k} = {_row_base(k)};" for k in range(nin))
    # Constant along the row: one load a thread.
    hoists = _JOIN_ROW.join(
        f"const bool h{k} = {_row_constant(k, f'b{k}')}; const float v{k} = h{k} ? ks_ld(in{k} + b{k}) : 0.f;"
        for k in range(nin)
    )
    # j, k: the tile and row of the value; sl = 32 * j + ty + 8 * k its position in the block
    tile_at = "tile[0][j][ty + 8 * k][tx]"
    loads = _JOIN_DEEP.join(
        f"float a{k}[1]; if constexpr (TI == {k}) a{k}[0] = {tile_at}; else if (h{k}) a{k}[0] = v{k}; "
        f"else if (b{k} >= 0) a{k}[0] = ks_ld(in{k} + b{k} + s); else ks_load<1>(in{k}, d{k}, orow * S + s, a{k});"
        for k in range(nin)
    )
    const_loads = _JOIN_DEEP.join(
        f"float a{k}[1]; if constexpr (TI == {k}) a{k}[0] = {tile_at}; else a{k}[0] = v{k};" for k in range(nin)
    )
    all_const = " && ".join(f"(TI == {k} || h{k})" for k in range(nin))
    fills = _JOIN_DEEP.join(
        f"if constexpr (TI == {k}) {tile_at} = ks_to_float(in{k}[first + sl * Ci]);" for k in range(nin)
    )
    call_args = [f"a{k}[0]" for k in range(nin)] + [f"r{k}[0]" for k in range(nout)]
    kernel = render(
        "elementwise/nhwc.cu", name=name, params=", ".join(params[:-1]) + ", const int64_t C, const int64_t S",
        tiles=tiles, nout=nout, fills=fills, bases=bases, hoists=hoists, loads=loads, const_loads=const_loads,
        all_const=all_const, outs=" ".join(f"float r{k}[1];" for k in range(nout)), call_args=", ".join(call_args),
        results=" ".join(f"tile[{k}][j][ty + 8 * k][tx] = r{k}[0];" for k in range(nout)),
        stores=" ".join(f"out{k}[obase + sl] = ks_from_float<{out_t}>(tile[{k}][j][tx][cl]);" for k in range(nout)),
    )
    narrow_kernel = _narrow_channels_kernel(name, spec, params, out_t, tiles)
    args = ", ".join(kernel_args[:-1]) + ", C, S"
    cases = "\n".join(
        (f"    case {k}: if (narrow) {name}_nhwc_narrow<{k}><<<grid_narrow, 256, 0, stream>>>({args});\n"
         f"             else {name}_nhwc<{k}><<<grid, 256, 0, stream>>>({args}); break;")
        if narrow_kernel else f"    case {k}: {name}_nhwc<{k}><<<grid, 256, 0, stream>>>({args}); break;"
        for k in tiled_inputs(spec)
    )
    kernel += "\n" + narrow_kernel
    return kernel, render("elementwise/nhwc_launch.cu", launcher_sig=launcher_sig, cases=cases, tiles=tiles,
                          narrow="C < 32" if narrow_kernel else "false")


def _row_base(k: int) -> str:
    """Operand k's offset at the start of output row `orow` (n, c) in the channels-last kernels:
    -1 for the tiled operand and for general strides (KS_STRIDED has none: read per element)."""
    return f"(TI == {k} || d{k}.mode == KS_STRIDED) ? -1 : ks_row_base_any(d{k}, orow, S)"


def _row_constant(k: int, base: str) -> str:
    """Whether operand k (its row offset `base`) is constant along the row: loaded once a thread."""
    return f"TI != {k} && {base} >= 0 && d{k}.mode != KS_FULL && d{k}.mode != KS_ROW"


# Static shared memory of the narrow kernel: its tiles plus, per operand and channel, the staged
# value, base and flag (4 + 8 + 1 bytes, padded); past 48 KB the wide kernel serves every C.
_SMEM_LIMIT = 48 * 1024


def _narrow_channels_kernel(name: str, spec: ElementwiseSpec, params: list[str], out_t: str, tiles: int) -> str:
    """The channels-last kernel for fewer than 32 channels (cuda/elementwise/nhwc_narrow.cu):
    a block reads one contiguous run of positions x all channels; "" where its shared memory
    would not fit."""
    nin, nout = len(spec.inputs), len(spec.outputs)
    if nout * tiles * 32 * 33 * 4 + nin * 32 * 16 > _SMEM_LIMIT:
        return ""
    row_setup = _JOIN_ROW.join(
        f"{{ const int64_t b = {_row_base(k)}; const bool h = {_row_constant(k, 'b')}; "
        f"row_base[{k}][t] = b; row_const[{k}][t] = h; row_value[{k}][t] = h ? ks_ld(in{k} + b) : 0.f; }}"
        for k in range(nin)
    )
    fills = _JOIN.join(
        f"if constexpr (TI == {k}) fill[i] = ks_to_float(in{k}[(nb * S + s0) * C + e]);" for k in range(nin)
    )
    loads = _JOIN_ROW.join(
        f"float a{k}[1]; if constexpr (TI == {k}) a{k}[0] = tile[0][sl][c]; "
        f"else if (row_const[{k}][c]) a{k}[0] = row_value[{k}][c]; "
        f"else if (row_base[{k}][c] >= 0) a{k}[0] = ks_ld(in{k} + row_base[{k}][c] + s); "
        f"else ks_load<1>(in{k}, d{k}, orow * S + s, a{k});"
        for k in range(nin)
    )
    call_args = [f"a{k}[0]" for k in range(nin)] + [f"r{k}[0]" for k in range(nout)]
    return render(
        "elementwise/nhwc_narrow.cu", name=name, params=", ".join(params[:-1]) + ", const int64_t C, const int64_t S",
        tiles=tiles, nin=nin, nout=nout, row_setup=row_setup, fills=fills, loads=loads,
        outs=" ".join(f"float r{k}[1];" for k in range(nout)), call_args=", ".join(call_args),
        results=" ".join(f"tile[{k}][sl][c] = r{k}[0];" for k in range(nout)),
        stores=" ".join(f"out{k}[o] = ks_from_float<{out_t}>(tile[{k}][sl][c]);" for k in range(nout)),
    )
