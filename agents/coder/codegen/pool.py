"""Pooling emitter: max / avg / adaptive-avg pooling over 1-3 spatial dims with the elementwise
ops before it (prologue, applied to every value a window reads) and after it (epilogue) in the
same kernel, so the tensor the windows slide over is read once and only the pooled result is
written (cuda/pool/).

Python decides the fragments: which operands are read per window tap (full-size, through their
descriptors at the input's logical index), once per window (`plane_inputs`: constant over the
spatial dims, such as a conv bias) or once per output (epilogue inputs); the binding computes
torch's output sizes and window bounds at run time, so one kernel serves every input shape.
"""

from __future__ import annotations

import math

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    check_inputs,
    device_operand_params,
    input_checks,
    operand_args,
    operand_params,
)
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import PoolSpec

THREADS = 256
KIND_ID = {"max": 0, "avg": 1, "adaptive_avg": 2}


def _check(spec: PoolSpec) -> tuple[list[int], list[int], list[int]]:
    """(tap operands, plane operands, epilogue operands): indices into `spec.inputs`, tap
    operands starting with 0 (the tensor the windows slide over)."""
    name = spec.name
    if spec.kind not in KIND_ID:
        raise ValueError(f"{name}: unknown pooling kind {spec.kind!r}")
    if spec.nd not in (1, 2, 3):
        raise ValueError(f"{name}: pooling over {spec.nd} spatial dims (1 to 3)")
    names = [t.name for t in spec.inputs]
    check_inputs(name, names, list(spec.epilogue_inputs + spec.plane_inputs),
                 "the tensor the windows slide over")
    if spec.kind == "adaptive_avg":
        if len(spec.output_size) != spec.nd or min(spec.output_size) < 1:
            raise ValueError(f"{name}: adaptive pooling needs {spec.nd} output sizes >= 1")
    else:
        fields = {"kernel": spec.kernel, "stride": spec.stride, "padding": spec.padding,
                  "dilation": spec.dilation}
        for key, values in fields.items():
            if len(values) != spec.nd:
                raise ValueError(f"{name}: {key} needs {spec.nd} values, got {list(values)}")
        if min(spec.kernel) < 1 or min(spec.stride) < 1 or min(spec.dilation) < 1 or min(spec.padding) < 0:
            raise ValueError(f"{name}: kernel, stride, dilation must be >= 1 and padding >= 0")
        if spec.kind == "avg" and max(spec.dilation) != 1:
            raise ValueError(f"{name}: avg pooling has no dilation")
    if spec.divisor < 0:
        raise ValueError(f"{name}: divisor {spec.divisor} < 0")
    epilogue = [names.index(n) for n in spec.epilogue_inputs]
    plane = [names.index(n) for n in spec.plane_inputs]
    taps = [k for k in range(len(names)) if k not in epilogue and k not in plane]
    return taps, plane, epilogue


def _geometry(spec: PoolSpec) -> str:
    """The binding's per-dim output size and window parameters (torch's pooling_output_shape)."""
    if spec.kind == "adaptive_avg":
        return "\n".join([
            "    g.out[k] = output_size[j];",
            "    g.k[k] = g.s[k] = g.dil[k] = 1;",
            "    g.p[k] = 0;"])
    return "\n".join([
        "    g.k[k] = kernel[j]; g.s[k] = stride[j]; g.p[k] = padding[j]; g.dil[k] = dilation[j];",
        f'    TORCH_CHECK(2 * g.p[k] <= g.k[k], "{spec.name}: padding should be at most half of the kernel size");',
        f"    const int64_t span = in + 2 * g.p[k] - g.dil[k] * (g.k[k] - 1) - 1 + ({int(spec.ceil_mode)} ? g.s[k] - 1 : 0);",
        "    g.out[k] = (span >= 0 ? span / g.s[k] : -((-span + g.s[k] - 1) / g.s[k])) + 1;",
        f"    if ({int(spec.ceil_mode)} && (g.out[k] - 1) * g.s[k] >= in + g.p[k]) --g.out[k];  // last window starts inside"])


def _ints(values: tuple[int, ...], nd: int, fill: int) -> str:
    return ", ".join(str(v) for v in (values or (fill,) * nd))


# The plane kernel's bounds: a window row's span of SPAN_MAX values in registers for its
# PLANE_OUTPUTS windows a thread, KH_MAX rows of them, WINDOW_MAX values in all (every row's
# loads are issued before the arithmetic).  8 windows a thread for stride-1 rows
# (with 16-byte loads at a padding of 4) measured slower on an H100 (bench/results/2026-12-06-
# h100-s23, call 3: level1/41 4.51 -> 6.52 ms, 44 3.14 -> 5.65, 42 3.87 -> 4.16; 64-80
# registers a thread against 35-62).
PLANE_OUTPUTS = 4
_PLANE_SPAN_MAX = 28
_PLANE_KH_MAX = 8
_PLANE_WINDOW_MAX = 64


def _plane_window(spec: PoolSpec, vec4: int) -> tuple[int, ...] | None:
    """(KH, KW, SH, SW, PH, PW, DH, DW) of a fixed 1-D or 2-D window for the contiguous-input
    plane kernel (cuda/pool/kernel.cu), or None where it does not apply: adaptive windows, 3-D,
    other than float32, or a window row span past the register budget."""
    if not vec4 or spec.kind == "adaptive_avg" or spec.nd not in (1, 2):
        return None
    pad = 2 - spec.nd  # 1-D: one row of height 1

    def dims(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
        return (fill,) * pad + tuple(values or (fill,) * spec.nd)

    (kh, kw), (sh, sw), (ph, pw) = dims(spec.kernel, 1), dims(spec.stride, 1), dims(spec.padding, 0)
    dh, dw = dims(spec.dilation, 1) if spec.kind == "max" else (1, 1)
    span = (PLANE_OUTPUTS - 1) * sw + (kw - 1) * dw + 1
    if kh > _PLANE_KH_MAX or span > _PLANE_SPAN_MAX or kh * span > _PLANE_WINDOW_MAX:
        return None
    return kh, kw, sh, sw, ph, pw, dh, dw


def _plane_fields(plane: tuple[int, ...] | None, rows: int = 1) -> dict[str, int]:
    """The plane kernel's template fields; `rows` output rows a thread (emit_pool(plane_rows=...)),
    fewer where the strip's input rows would hold more than _PLANE_WINDOW_MAX values, 1 for 1-D
    windows (one output row)."""
    keys = ("kh", "kw", "sh", "sw", "ph", "pw", "dh", "dw")
    kh, kw, sh, sw, _, _, dh, dw = plane or (1, 1, 1, 1, 0, 0, 1, 1)
    fields = {f"plane_{key}": value for key, value in zip(keys, plane or (1, 1, 1, 1, 0, 0, 1, 1))}
    span = (PLANE_OUTPUTS - 1) * sw + (kw - 1) * dw + 1
    while rows > 1 and (kh == 1 or ((rows - 1) * sh + (kh - 1) * dh + 1) * span > _PLANE_WINDOW_MAX):
        rows -= 1
    return {**fields, "plane_v": PLANE_OUTPUTS, "plane_rows": rows}


def _reads_each_column_twice(kw: int, sw: int, dw: int) -> bool:
    """Whether a window row reads each input column it reads at least twice: its windows start
    every sw columns and read kw columns each, of every gcd(sw, dw)-th column, so kw * gcd / sw
    reads a column (a form that loads a column once for several windows pays off only then)."""
    return kw * math.gcd(sw, dw) >= 2 * sw


# The channels-last row kernels (cuda/pool/kernel.cu's cl4r / cl4rt): ROW_OUTPUTS output columns
# x 4 channels a thread, fewer where a window row's span of float4 columns, all loaded before its
# arithmetic, would pass _ROW_SPAN_MAX (4 registers a column; at 12, level2/82's 4x4 / stride-4
# window spilled).  Measured on one H100 against the one-position cl4 / cl4t kernels
# (bench/pool_row_timing.py, bench/results/2026-12-06-h100-s26): level3/6's 3x3 / stride-1 pool
# 2.25 -> 1.54 ms (NCHW out) and 1.79 -> 0.88 (NHWC out), where each input column is read by 3
# windows of a row; but AlexNet's 3x3 / stride 2 (1.5 windows a column) 0.70 -> 0.75 and
# 0.61 -> 0.73, and non-overlapping 2x2 / 4x4 windows within 4% either way.  So the row form
# takes windows whose row reads each column at least twice (_reads_each_column_twice).  And a
# pool kept channels-last (NHWC out, cl4r) with a non-overlapping, undilated window of at most
# _ROW_KEPT_TAPS taps: the 2x2 pools of level2/35 (hardswish before, mish after) and 46 (tanh
# between subtractions) ran 0.371 and 0.377 ms in the row form against 0.550 and 0.533 in the cl4
# kernel over NHWC [128, 128, 126, 126] on an H200 (bench/pool_pairs_timing.py,
# bench/results/2026-12-07-h200-s36), 0.441 against 0.460 with no arithmetic on an H100 (s26);
# with a contiguous output (cl4rt) the same windows ran slower in the row form (0.668 vs 0.635,
# 0.813 vs 0.582), and a kept 4x4 window within 3% of cl4 (s26).  (RegNet's and VGG's 2x2 max pools between convolutions are kept pools.)
ROW_OUTPUTS = 4
_ROW_KEPT_TAPS = 4
_ROW_SPAN_MAX = 9
_ROW_TAPS_MAX = 27  # the cl4 kernels' unrolled window bound


def _row_window(spec: PoolSpec, vec4: int, always: bool = False) -> tuple[int, ...] | None:
    """(V, KH, KW, SH, SW, PH, PW, DH, DW) of the row form of the channels-last 4-channel kernels,
    or None where the cl4 kernels stay: not float32 / other tap operands, adaptive windows, other
    than 2-D (a 3-D window, KD > 1 included), over _ROW_TAPS_MAX taps, a window row reading each
    column fewer than twice (unless the pool is kept channels-last with a non-overlapping,
    undilated window of at most _ROW_KEPT_TAPS taps, or `always`), or a span too wide for 2
    columns a thread."""
    if not vec4 or spec.kind not in ("max", "avg") or spec.nd != 2:
        return None
    (kh, kw), (sh, sw), (ph, pw) = spec.kernel, spec.stride, spec.padding
    dh, dw = tuple(spec.dilation) if spec.kind == "max" else (1, 1)
    # (the measured kept windows: non-overlapping and undilated, 2x2 / stride 2)
    kept_small = (spec.keep_channels_last and kh * kw <= _ROW_KEPT_TAPS and (sh, sw) == (kh, kw)
                  and (dh, dw) == (1, 1))
    if kh * kw > _ROW_TAPS_MAX or not (always or kept_small or _reads_each_column_twice(kw, sw, dw)):
        return None
    v = ROW_OUTPUTS
    while v >= 2 and (v - 1) * sw + (kw - 1) * dw + 1 > _ROW_SPAN_MAX:
        v -= 1
    if v < 2:
        return None
    return v, kh, kw, sh, sw, ph, pw, dh, dw


# The strip forms: R output rows a thread, each input row of the strip loaded once for every
# output row whose window holds it, which saves loads where a window's rows overlap the next
# output row's (a stride below the window's height: level3/6's 3x3 / stride 1 loads 4 input rows
# for 2 output rows instead of 6).  Timed on an H100 (bench/pool_row_timing.py and
# bench/pool_plane_vl_timing.py, bench/results/2026-12-07-h100-s38), both GPU tests passing:
# - the contiguous-input plane kernel (emit_pool(plane_rows=R)): level1/42's 4x4 / stride 1
#   3.349 -> 2.718 ms at R = 4 (2.730 at 2), a 3x3 / stride 1 max after relu(x + b) 0.908 ->
#   0.669 (0.698); a 2x2 / stride 2 window and the 1-D ones (one output row) within 0.5%.  So
#   windows whose rows overlap take _PLANE_STRIP_ROWS rows (fewer where the register budget
#   says, _plane_fields), the others 1; and a pool with an epilogue operand keeps 1: with one,
#   ptxas spills 12-56 bytes in the strip kernels of tests/test_pool_gpu.py's windows (none with
#   prologue operands only, the measured case), and no strip with one has been timed.
# - the kept row kernel (cl4r, emit_pool(row_rows=R)): level3/6's 3x3 / stride 1 with an NHWC
#   output 0.809 ms at R = 1, 0.888 at 2, 0.850 at 4; with relu(x + b) 0.997, 0.957, 0.982.
#   Mixed: the default stays 1.
_PLANE_STRIP_ROWS = 4
_STRIP_ROWS_MAX = 4


def _rows_overlap(spec: PoolSpec) -> bool:
    """Whether a fixed 2-D window's rows overlap the next output row's: its height (dilated)
    passes its vertical stride (1-D and 3-D windows, adaptive ones: False)."""
    if spec.nd != 2 or spec.kind == "adaptive_avg":
        return False
    dh = spec.dilation[0] if spec.kind == "max" else 1
    return (spec.kernel[0] - 1) * dh + 1 > spec.stride[0]


def _smem1d_window(spec: PoolSpec, plane_window: tuple[int, ...] | None) -> bool:
    """Whether emit_pool(plane_smem=True) gives `spec` the shared-memory 1-D kernel (cuda/pool/
    kernel.cu's smem1d): a 1-D max window of stride 1 that the plane kernel takes (float32, a
    fixed window within its span bound, so the kernel's static tile stays near 16.5 KB)."""
    return plane_window is not None and spec.nd == 1 and spec.kind == "max" and plane_window[3] == 1


def emit_pool(spec: PoolSpec, row_form: bool = True, channel_vec: bool = True,
              plane_vl_padded: bool = True, plane_inside: bool = True, cl4t_wide: bool = True,
              row_always: bool = False, row_group: int = 1, row_rows: int = 1,
              plane_rows: int | None = None, plane_smem: bool = False) -> KernelSource:
    """The pooling kernels of `spec`.  row_form=False keeps the one-position cl4 kernels where the
    row form would run (bench/pool_row_timing.py builds both to compare them); channel_vec=False
    reads the channels-last kernels' per-channel operands an offset a channel, as before
    ks_ld_planes4 (bench/pool_channel_operands_timing.py); plane_vl_padded=False gives the plane
    kernel 16-byte loads only on unpadded rows, as before they were taken on rows padded by a
    multiple of 4 (bench/pool_plane_vl_timing.py compares the two); plane_inside=True adds the
    finish of a thread's windows that all lie inside the input with a constant divisor and no
    window bounds (on an H100 it took level1/44's plane kernel from 3.10 to 2.90 ms, level1/41's
    from 3.65 to 3.54, level3/13's pool from 0.566 to 0.476, two max2d cases within 1%:
    bench/results/2026-12-07-h100-s30; the default since the pool GPU tests passed with it,
    bench/results/2026-12-07-h100-s32).  cl4t_wide=True sizes the tiled kernel's tile by the
    channel count (more positions below 64 channels, and a row stride free of 8- to 32-way
    bank conflicts; False: 32 positions always, as before; bench/pool_slices_timing.py compares
    the two); row_always=True takes the row form for every fixed 2-D window it can hold,
    whatever the rule (bench/pool_pairs_timing.py); row_group issues that many window rows'
    loads together in the row form (1, the default: a row at a time; at most 18 loads: the
    kernel clamps it; KH rows together on level3/6's 3x3 window, H100: 1.541 -> 1.531 ms with
    an NCHW output, 0.901 -> 1.088 with an NHWC one, bench/results/2026-12-07-h100-s37).
    row_rows: the output rows a thread of the kept row kernel (cl4r) pools, 1 (the default, the
    measured kernel) to _STRIP_ROWS_MAX (the strip form above, mixed on an H100; it loads a
    row at a time, so row_group does not apply with R > 1; bench/pool_row_timing.py compares
    them; 4 rows of a 5x5 average with operands spill 16 bytes).  plane_rows: the output rows a
    thread of the contiguous-input plane kernel pools, 1 to _STRIP_ROWS_MAX, fewer where the
    strip's rows would pass the kernel's register budget; None (the default): _PLANE_STRIP_ROWS
    for windows whose rows overlap (_rows_overlap) in a pool without epilogue operands, else 1
    (bench/pool_plane_vl_timing.py's `inside` form is plane_rows=1, `strip2` / `strip4` the
    others).  plane_smem=True: a 1-D max window of stride 1 over contiguous rows takes the
    shared-memory kernel (_smem1d_window; written in s38 without a GPU, off by default until
    bench/pool_plane_vl_timing.py's `smem1d` form and its GPU test have run)."""
    name = check_identifier(spec.name)
    if row_group < 1:
        raise ValueError(f"row_group is a number of window rows, >= 1; got {row_group}")
    if plane_rows is not None and not 1 <= plane_rows <= _STRIP_ROWS_MAX:
        raise ValueError(f"plane_rows is a number of output rows, 1 to {_STRIP_ROWS_MAX}; got {plane_rows}")
    if not 1 <= row_rows <= _STRIP_ROWS_MAX:
        raise ValueError(f"row_rows is a number of output rows, 1 to {_STRIP_ROWS_MAX}; got {row_rows}")
    taps, plane, epilogue = _check(spec)
    if plane_rows is None:  # (after _check: the window's fields are whole)
        plane_rows = _PLANE_STRIP_ROWS if _rows_overlap(spec) and not spec.epilogue_inputs else 1
    names = [t.name for t in spec.inputs]
    pro_out = spec.prologue_out or (spec.prologue[-1].out if spec.prologue else names[0])
    pro_inputs = sorted(taps + plane)
    pro = compile_ops(f"{name}_pro", tuple(names[k] for k in pro_inputs), spec.prologue, (pro_out,))
    epi = compile_ops(f"{name}_epi", ("acc",) + tuple(names[k] for k in epilogue), spec.epilogue,
                      (spec.epilogue_out,))
    out_t = CUDA_TYPE[spec.out_dtype]
    params = operand_params(spec.inputs)
    kernel_args = operand_args(spec.inputs)
    # operand k's value at the input's logical (contiguous NC...) index of the current tap
    tap_index = "((plane * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw"
    spatial_loads = " ".join(f"const float a{k} = ks_ld(p{k} + ks_offset(d{k}, {tap_index}));"
                             for k in taps if k != 0)
    plane_loads = " ".join(f"const float a{k} = ks_ld(p{k} + ks_offset(d{k}, plane * in_plane));"
                           for k in plane)
    epi_loads = " ".join(f"const float e{k} = ks_ld(p{k} + ks_offset(d{k}, o));" for k in epilogue)
    # The channels-last 4-channel kernel (cuda/pool/kernel.cu): float32 in and out, and no
    # full-size operand read per tap but the input (plane operands are loaded once a channel).
    vec4 = int(taps == [0] and spec.inputs[0].dtype == "float32" and spec.out_dtype == "float32")
    window = (0, 0, 0) if spec.kind == "adaptive_avg" else (1,) * (3 - spec.nd) + tuple(spec.kernel)
    # the one-value kernel's unrolled window rows: no full-size operand but the input per tap
    kw_row = window[2] if taps == [0] and 1 <= window[2] <= 16 else 0
    # (that branch is compiled either way: other tap operands, which it never reads, as 0)
    row_pro_args = ", ".join(f"a{k}" if k == 0 or k in plane else "0.f" for k in pro_inputs)
    plane_loads_cl4 = " ".join(f"plane_vals[j][{i}] = ks_ld(p{k} + ks_offset(d{k}, plane * in_plane));"
                               for i, k in enumerate(plane))
    plane_loads_cl4x4 = " ".join(f"ks_ld_planes4(p{k}, d{k}, plane0, in_plane, plane_vals, {i});"
                                 for i, k in enumerate(plane))
    if not channel_vec:  # the offset a plane and operand that ks_ld_planes4 replaced
        plane_loads_cl4x4 = ("\n#pragma unroll\n  for (int j = 0; j < 4; ++j) { const int64_t plane = plane0 + j; "
                             "(void)plane; " + plane_loads_cl4 + " }")
    plane_args_cl4 = " ".join(f"const float a{k} = plane_vals[j][{i}];" for i, k in enumerate(plane))
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, "
                    f"const KsPoolGeom& g, int cl, int64_t per_sample, int plane_ok, int vl, int row_ok, "
                    f"cudaStream_t stream)")
    plane_window = _plane_window(spec, vec4)
    plane_fields = _plane_fields(plane_window, plane_rows)
    # a span's first 16-byte load lands on a multiple of 4 (V = 4 windows a thread) where the
    # padding is one; the binding checks the rest (W % 4, 16-byte aligned rows)
    plane_vl = plane_fields["plane_pw"] % 4 == 0 if plane_vl_padded else plane_fields["plane_pw"] == 0
    row_window = _row_window(spec, vec4, always=row_always) if row_form else None
    smem1d = plane_smem and plane_vl and _smem1d_window(spec, plane_window)
    cuda = render(
        "pool/kernel.cu", name=name, kind=spec.kind, nd=spec.nd, pro_fn=pro.source, epi_fn=epi.source,
        threads=THREADS, params=params, out_t=out_t, plane_loads=plane_loads, spatial_loads=spatial_loads,
        pro_args=", ".join(f"a{k}" for k in pro_inputs),
        epi_loads=epi_loads, epi_args=", ".join(["acc"] + [f"e{k}" for k in epilogue] + ["acc"]),
        launcher_sig=launcher_sig, kernel_args=kernel_args, kind_id=KIND_ID[spec.kind],
        vec4=vec4, kd=window[0], kh=window[1], kw=window[2], nplane=len(plane), kw_row=kw_row, row_pro_args=row_pro_args,
        plane_loads_cl4=plane_loads_cl4, plane_loads_cl4x4=plane_loads_cl4x4, plane_args_cl4=plane_args_cl4,
        device_params=device_operand_params(spec.inputs),
        device_args=", ".join(f"p{k}, d{k}" for k in range(len(spec.inputs))),
        plane_kernel=int(plane_window is not None), plane_inside=int(plane_inside), **plane_fields,
        smem1d_kernel=int(smem1d),
        cl4t_wide=int(cl4t_wide), row_group=row_group,
        row_rows=row_rows,
        row_kernel=int(row_window is not None), row_v=row_window[0] if row_window else 1,
        row_targs=", ".join(map(str, row_window or (1, 1, 1, 1, 1, 0, 0, 1, 1))))
    n = len(spec.inputs)
    binding = render(
        "pool/binding.cpp", name=name, kind=spec.kind, nd=spec.nd, n=n,
        cparams=", ".join(f"at::Tensor in_{k}" for k in range(n)),
        checks=input_checks(name, spec.inputs),
        kernel=_ints(spec.kernel, spec.nd, 1), stride=_ints(spec.stride, spec.nd, 1),
        padding=_ints(spec.padding, spec.nd, 0), dilation=_ints(spec.dilation, spec.nd, 1),
        output_size=_ints(spec.output_size, spec.nd, 1), geometry=_geometry(spec),
        divisor=spec.divisor, count_include_pad=int(spec.count_include_pad),
        keep="true" if spec.keep_channels_last else "false", vec4=vec4,
        plane_kernel=int(plane_window is not None), plane_vl=int(plane_vl),
        row_kernel=int(row_window is not None),
        out_dtype=TORCH_DTYPE[spec.out_dtype],
        ptrs=", ".join(f"&in_{k}" for k in range(n)),
        shapes=", ".join("os" if k in epilogue else "xs" for k in range(n)),
        in_ptrs=", ".join(f"in_{k}.data_ptr()" for k in range(n)))
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=tuple(names),
        notes=(
            f"{spec.kind} pooling over {spec.nd} spatial dim(s): one thread per output in the input's "
            "memory order (NCHW or channels-last), a contiguous output, window bounds as torch's",
            "prologue applied to every value a window reads, epilogue to the pooled value: the input "
            "is read once, only the pooled tensor is written",
        ),
    )
