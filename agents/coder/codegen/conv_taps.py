"""Conv tap-means emitter (cuda/conv_taps/): the kernel behind rewrites._conv_spatial_mean, one
read of a 2-D convolution's input giving every kernel tap's mean input over the output positions,
[C, N, kh * kw].  The geometry is the module's, so it is compiled in as constants; the input's
sizes and strides are read at run time (any layout, any batch and spatial size)."""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import check_identifier
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import CONV_TAP_MEANS_MAX_TAPS, ConvTapMeansSpec


def _output_size(size: str, k: int, s: int, p: int, d: int, op: int, transposed: bool) -> str:
    """torch's output size of the conv along one dim, as a C++ expression of the input size."""
    if transposed:
        return f"({size} - 1) * {s} - {2 * p} + {d * (k - 1)} + {op} + 1"
    span = f"({size} + {2 * p} - {d * (k - 1)} - 1)"  # C++ divides toward zero: an empty output stays 0
    return f"({span} >= 0 ? {span} / {s} + 1 : 0)"


def emit_conv_taps(spec: ConvTapMeansSpec) -> KernelSource:
    name = check_identifier(spec.name)
    kh, kw = spec.kernel
    if spec.input.dtype != "float32":
        raise ValueError(f"{name}: the tap means read float32 input, got {spec.input.dtype}")
    if kh < 1 or kw < 1 or kh * kw > CONV_TAP_MEANS_MAX_TAPS:
        raise ValueError(f"{name}: kernel {kh} x {kw} outside 1..{CONV_TAP_MEANS_MAX_TAPS} taps")
    if min(spec.stride + spec.dilation) < 1 or min(spec.padding + spec.output_padding) < 0:
        raise ValueError(f"{name}: invalid geometry {spec}")
    (sh, sw), (ph, pw), (dh, dw), (oh, ow) = spec.stride, spec.padding, spec.dilation, spec.output_padding
    what = "transposed convolution" if spec.transposed else "convolution"
    launcher_sig = (f"void {name}_launch(const void* x, int64_t sN, int64_t sC, int64_t sH, int64_t sW, int64_t N, "
                    "int64_t C, int64_t H, int64_t W, int64_t Ho, int64_t Wo, float scale, void* out, "
                    "cudaStream_t stream)")
    cuda = render(
        "conv_taps/kernel.cu", name=name, kh=kh, kw=kw, what=what, sh=sh, sw=sw, ph=ph, pw=pw, dh=dh, dw=dw,
        # a convolution's tap positions step by its stride; a transposed one's are consecutive inputs
        step_h=1 if spec.transposed else sh, step_w=1 if spec.transposed else sw,
        transposed="true" if spec.transposed else "false", launcher_sig=launcher_sig)
    binding = render(
        "conv_taps/binding.cpp", name=name, kh=kh, kw=kw, what=what, x_name=spec.input.name, taps=kh * kw,
        out_h=_output_size("H", kh, sh, ph, dh, oh, spec.transposed),
        out_w=_output_size("W", kw, sw, pw, dw, ow, spec.transposed))
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=(spec.input.name,),
        notes=(f"each {kh} x {kw} kernel tap's mean input over the {what}'s output positions, in one read "
               "of its input (the conv output never computed)",
               "a block per (n, c) plane, warps along rows, lanes along the row with four loads in flight"),
    )
