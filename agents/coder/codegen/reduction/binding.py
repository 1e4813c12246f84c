"""The host binding of a reduction: validates the inputs, views the tensor as [outer, R, inner],
plans (ks_plan_reduction, in ks_shared_types.h), describes the operands for the path, allocates
the output and the workspace, and calls the launcher."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import TORCH_DTYPE, input_checks
from kernelstitch.agents.coder.codegen.reduction.context import (
    COLUMN_TILE_KINDS,
    ROWS32_KINDS,
    Reduction,
    row_any_layout,
)
from kernelstitch.agents.coder.codegen.templates import render


def binding(r: Reduction) -> str:
    spec, name, n = r.spec, r.name, len(r.spec.inputs)
    if spec.kind == "layer_norm":
        view = render("reduction/binding_view_layer_norm.cpp", name=name, norm_ndim=spec.norm_ndim)
    elif spec.kind == "group_norm":
        affine = [k for k in (r.roles.weight, r.roles.bias) if k is not None]
        view = render(
            "reduction/binding_view_group_norm.cpp", name=name, groups=spec.groups,
            constant_checks="".join(f" && ks_spatially_constant(in_{k}, nd)" for k in range(1, n)),
            small_contiguous=_small_contiguous(n),
            affine_views="\n".join(
                f'  TORCH_CHECK(in_{k}.numel() == channels, "{name}: group_norm weight/bias of ", '
                f'ks_str(in_{k}.numel()), " values for ", ks_str(channels), " channels");\n'
                f"  in_{k} = in_{k}.reshape(affine_shape);" for k in affine))
    else:
        if r.normalizing:
            out_shape = "out_shape = x_sizes;"
        elif spec.keepdim:
            out_shape = "out_shape = x_sizes; for (int64_t k = dim; k < dim + count; ++k) out_shape[k] = 1;"
        else:
            out_shape = "out_shape = x_sizes; out_shape.erase(out_shape.begin() + dim, out_shape.begin() + dim + count);"
        channels_last = _channels_last_view(r, n)
        view = render("reduction/binding_view_dim.cpp", name=name, dim=spec.dim, count=spec.dim_count,
                      out_shape=out_shape, channels_last=channels_last)
    ptrs = ", ".join(f"&in_{k}" for k in range(n))
    shapes = ", ".join("os" if k in r.roles.epilogue else "xs" for k in range(n))
    out_format, out_finish = _kept_channels_last(spec.kind == "group_norm" and spec.keep_channels_last)
    cols_replan = ""
    if r.normalizing and spec.kind not in COLUMN_TILE_KINDS:  # no column kernel to launch
        cols_replan = render("reduction/binding_cols_replan.cpp", nf=r.nf)
    return render(
        "reduction/binding.cpp", name=name, kind=spec.kind, n=n, nf=r.nf, vec=r.vec, view=view,
        cols_replan=cols_replan, out_dtype=TORCH_DTYPE[spec.out_dtype],
        out_format=out_format, out_finish=out_finish,
        inner_check=(f'\n  TORCH_CHECK(inner == 1, "{name}: built without column kernels (a reduction over '
                     f'the last dims), but inner = ", ks_str(inner));') if spec.trailing else "",
        normalizing="true" if r.normalizing else "false", rows32="true" if spec.kind in ROWS32_KINDS else "false",
        cparams=", ".join(f"at::Tensor in_{k}" for k in range(n)),
        checks=input_checks(name, spec.inputs),
        ptrs=ptrs,
        shapes=shapes,
        row_read=", ".join(str(k) for k in r.row_operands()),
        col_read=", ".join(str(k) for k in r.column_operands()),
        tile_read=", ".join(str(k) for k in r.roles.prologue),
        row_any="true" if row_any_layout(spec.kind) else "false",
        span_plan=render("reduction/binding_gn_span.cpp", vec=r.vec, ptrs=ptrs, shapes=shapes,
                         keep="true" if spec.keep_channels_last else "false")
        if spec.kind == "group_norm" else render("reduction/binding_softmax_nhwc_plan.cpp")
        if spec.kind in COLUMN_TILE_KINDS and not spec.trailing else "",
        in_ptrs=", ".join(f"in_{k}.data_ptr()" for k in range(n)),
    )


def _kept_channels_last(keep: bool) -> tuple[str, str]:
    """A group_norm whose output the program keeps channels-last (spec.keep_channels_last):
    allocated NHWC / NDHWC when its NHWC kernels run (they store it so: gn_nhwc.cu's KEEP), else
    written contiguous by the other kernels and copied once.  (allocation options, after-launch
    code); ("", "") when not kept."""
    if not keep:
        return "", ""
    fmt = "(nd == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d)"
    return (f".memory_format(gn_nhwc && (nd == 4 || nd == 5) ? {fmt} : at::MemoryFormat::Contiguous)",
            f"\n  if (!gn_nhwc && (nd == 4 || nd == 5)) out = out.contiguous({fmt});")


def _channels_last_view(r: Reduction, n: int) -> str:
    """How the binding reads a channels-last input: a reduction (not a normalisation: its output
    has the input's shape) over the channels, the spatial dims or all but the batch views it with
    its channels last (binding_channels_last.cpp); softmax kinds over the channels take their
    NHWC kernel where the other operands allow (binding_softmax_nhwc.cpp); others read it
    through their descriptors."""
    constant = "".join(f" && ks_spatially_constant(in_{k}, nd)" for k in range(1, n))
    if r.spec.kind in COLUMN_TILE_KINDS and not r.spec.trailing:
        return render("reduction/binding_softmax_nhwc.cpp", constant_checks=constant, nepi=len(r.roles.epilogue),
                      small_contiguous=_small_contiguous(n))
    if r.normalizing:
        return ""
    return render(
        "reduction/binding_channels_last.cpp",
        permute="\n    ".join(f"in_{k} = ks_channels_to_last(in_{k}, nd);"
                              for k in range(n) if k not in r.roles.epilogue),
        spatial="" if r.spec.trailing else " || (dim == 2 && count == nd - 2)")


def _small_contiguous(n: int) -> str:
    """Every operand but the input made contiguous: the NHWC kernels load them at
    ks_row_base_any's per-channel base, which general strides (KS_STRIDED) have none of."""
    return "\n".join(f"    in_{k} = in_{k}.contiguous();" for k in range(1, n)) or "    (void)0;"
