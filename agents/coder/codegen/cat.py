"""Concatenation emitter: torch.cat along one dim with each input's elementwise producer chain
computed inside the copy (cuda/cat/).

One grid-stride pass over the output seen as [outer, D, inner]: each element finds its segment
along D (bisection over the run-time offsets), computes the segment's
value from that segment's operands at the segment's own index (read through run-time
descriptors, so broadcast operands such as a per-channel bias cost no copy), and stores it.
Channels-last inputs concatenated along the channels into a contiguous output take a tiled
kernel instead, read along the channels and written along the positions (kernel.cu's
`_tr_kernel`): the output-order walk would read them at a stride of C values.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    input_checks,
    operand_args,
    operand_params,
)
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import CatSpec

_INDENT = "    "


def _check(spec: CatSpec) -> list[int]:
    """The segment each input belongs to (every input read by exactly one segment)."""
    name = spec.name
    if not spec.segments:
        raise ValueError(f"{name}: a concatenation needs at least one segment")
    owner = [-1] * len(spec.inputs)
    for k, seg in enumerate(spec.segments):
        if not seg.inputs:
            raise ValueError(f"{name}: segment {k} reads no input")
        for i in seg.inputs:
            if not 0 <= i < len(spec.inputs):
                raise ValueError(f"{name}: segment {k} reads input {i} of {len(spec.inputs)}")
            if owner[i] != -1:
                raise ValueError(f"{name}: input {spec.inputs[i].name} is read by segments {owner[i]} and {k}")
            owner[i] = k
    if -1 in owner:
        raise ValueError(f"{name}: input {spec.inputs[owner.index(-1)].name} is read by no segment")
    return owner


def emit_cat(spec: CatSpec) -> KernelSource:
    name = check_identifier(spec.name)
    owner = _check(spec)
    nin, nseg = len(spec.inputs), len(spec.segments)
    out_t = CUDA_TYPE[spec.out_dtype]
    fns, cases, tr_cases = [], [], []
    for k, seg in enumerate(spec.segments):
        names = tuple(spec.inputs[i].name for i in seg.inputs)
        fn = compile_ops(f"{name}_s{k}", names, seg.ops, (seg.out,))
        fns.append(fn.source)
        loads = " ".join(f"float a{i}[VEC]; ks_load<VEC>(p{i}, d{i}, j, a{i});" for i in seg.inputs)
        args = ", ".join([f"a{i}[v]" for i in seg.inputs] + ["r[v]"])
        cases.append("\n".join([
            f"{_INDENT}  case {k}: {{",
            f"{_INDENT}    const int64_t j = (o * (g.off[{k + 1}] - g.off[{k}]) + (d - g.off[{k}])) * g.inner + c;",
            f"{_INDENT}    {loads}",
            f"{_INDENT}    for (int v = 0; v < VEC; ++v) {name}_s{k}({args});",
            f"{_INDENT}    break;",
            f"{_INDENT}  }}"]))
        # the transposing kernel: a thread's PER positions of its channel, every load issued
        # first (a position past the block's end loads the last one and is not stored: clamped,
        # not predicated), then the segment's chain into the tile
        loads = " ".join(f"float a{i}[PER];" for i in seg.inputs)
        bases = " ".join(f"const int64_t b{i} = ks_offset(d{i}, first);" for i in seg.inputs)
        affine = " ".join(f"a{i}[q] = ks_ld(p{i} + b{i} + (int64_t)slc * g.sstep[{i}]);" for i in seg.inputs)
        tr_cases.append("\n".join([
            f"{_INDENT}  case {k}: {{",
            f"{_INDENT}    const int64_t first = (o * (g.off[{k + 1}] - g.off[{k}]) + (d - g.off[{k}])) * g.inner + s0;",
            f"{_INDENT}    {loads}",
            f"{_INDENT}    {bases}",
            f"{_INDENT}#pragma unroll",
            f"{_INDENT}    for (int q = 0; q < PER; ++q) {{",
            f"{_INDENT}      const int sl = ty + 8 * q, slc = sl < npos ? sl : npos - 1;",
            f"{_INDENT}      {affine}",
            f"{_INDENT}    }}",
            f"{_INDENT}#pragma unroll",
            f"{_INDENT}    for (int q = 0; q < PER; ++q) {{",
            f"{_INDENT}      const int sl = ty + 8 * q;",
            f"{_INDENT}      if (sl < npos) {{ float r = 0.0f; "
            f"{name}_s{k}({', '.join([f'a{i}[q]' for i in seg.inputs] + ['r'])}); tile[tx][sl] = r; }}",
            f"{_INDENT}    }}",
            f"{_INDENT}    break;",
            f"{_INDENT}  }}"]))
    # the segment holding d: the last k with off[k] <= d (an empty segment is never chosen: the
    # next one starts at the same offset), by bisection (a DenseNet cat has up to 48 segments)
    segments = "\n".join([
        f"{_INDENT}int lo = 0, hi = {nseg - 1};",
        f"{_INDENT}while (lo < hi) {{",
        f"{_INDENT}  const int mid = (lo + hi + 1) >> 1;",
        f"{_INDENT}  if (g.off[mid] <= d) lo = mid; else hi = mid - 1;",
        f"{_INDENT}}}",
        f"{_INDENT}switch (lo) {{",
        *cases,
        f"{_INDENT}  default: break;",
        f"{_INDENT}}}"])
    tr_segments = "\n".join([f"{_INDENT}switch (lo) {{", *tr_cases, f"{_INDENT}  default: break;",
                              f"{_INDENT}}}"])
    params = operand_params(spec.inputs)
    launch_args = operand_args(spec.inputs)
    launcher_sig = (f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* out, int64_t outer, "
                    "int64_t D, int64_t inner, const int64_t* offsets, int vec, bool transpose, "
                    "cudaStream_t stream)")
    # 4 outputs a thread (16-byte loads and stores) only in float32: ks_ld_vec packs 16 bytes
    vec4 = int(spec.out_dtype == "float32" and all(t.dtype in ("float32", "bool") for t in spec.inputs))
    cuda = render(
        "cat/kernel.cu", name=name, nseg=nseg, nseg_plus_one=nseg + 1, nin=nin, segment_fns="\n".join(fns),
        tr_tiles=4 if max(len(seg.inputs) for seg in spec.segments) <= 2 else 2,
        params=params, out_t=out_t, segments=segments, tr_segments=tr_segments, launcher_sig=launcher_sig,
        transposing=int(spec.channels_last_inputs),
        launch_args=launch_args, vec4=vec4,
    )
    segment_shapes = ", ".join(
        "ks_broadcast_shape({" + ", ".join(f"in_{i}" for i in seg.inputs) + "})" for seg in spec.segments)
    keep = spec.keep_channels_last
    keep_layout = render(
        "cat/keep_channels_last.cpp", in_refs=", ".join(f"&in_{k}" for k in range(nin)),
        permute="\n".join(f"    in_{k} = ks_channels_to_last(in_{k}, cl_rank);" for k in range(nin)),
    ) if keep else ""
    binding = render(
        "cat/binding.cpp", name=name, nseg=nseg, nseg_plus_one=nseg + 1, nin=nin, dim=int(spec.dim),
        keep_layout=keep_layout, keep_dim="\n  if (cat_cl) dim = rank - 1;  // the channels, last in the views" if keep else "",
        ret="(cat_cl ? out.movedim(-1, 1) : out)" if keep else "out",
        cparams=", ".join(f"at::Tensor in_{k}" for k in range(nin)),
        checks=input_checks(name, spec.inputs), vec4=vec4, transposing=int(spec.channels_last_inputs),
        segment_shapes=segment_shapes, out_dtype=TORCH_DTYPE[spec.out_dtype],
        in_refs=", ".join(f"&in_{k}" for k in range(nin)),
        in_shapes=", ".join(f"c10::IntArrayRef(seg[{owner[k]}])" for k in range(nin)),
        in_ptrs=", ".join(f"in_{k}.data_ptr()" for k in range(nin)),
    )
    fused = sum(1 for seg in spec.segments if seg.ops)
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(f"concatenation of {nseg} segments in one pass; {fused} compute their producer's "
               "elementwise chain where they are stored",
               "operands through run-time descriptors at each segment's own index"),
    )
