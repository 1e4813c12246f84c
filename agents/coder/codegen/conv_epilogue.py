"""Direct convolution + elementwise epilogue emitter (cuda/conv_epilogue/): a 2-D convolution of
few input channels computed in fp32 FMAs, its elementwise chain applied in registers, one store.

The geometry (kernel, stride, padding) and the staged input-channel count are compiled in; the
batch, channel and spatial sizes are read at run time.  The chain is the elementwise emitter's
device function (`compile_ops`), its inputs other than the convolution's output read through the
same run-time descriptors (`KsOperand`) as the elementwise kernels.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import CUDA_TYPE, TORCH_DTYPE, check_identifier
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    CONV_EPILOGUE_COLS,
    CONV_EPILOGUE_ROWS,
    CONV_EPILOGUE_WARPS,
    ConvEpilogueSpec,
    conv_epilogue_staged_channels,
)

_JOIN = "\n      "


def emit_conv_epilogue(spec: ConvEpilogueSpec) -> KernelSource:
    name = check_identifier(spec.name)
    ew = spec.epilogue
    (kh, kw), (sh, sw), (ph, pw) = spec.kernel, spec.stride, spec.padding
    if spec.x.dtype != "float32" or spec.weight.dtype != "float32":
        raise ValueError(f"{name}: the direct convolution reads float32 input and weight")
    if kh < 1 or kw < 1 or sh < 1 or sw < 1 or ph < 0 or pw < 0:
        raise ValueError(f"{name}: invalid geometry {spec.kernel} / {spec.stride} / {spec.padding}")
    if not 0 <= spec.operand < len(ew.inputs) or not ew.outputs:
        raise ValueError(f"{name}: the epilogue's operand {spec.operand} is not one of its inputs")
    if not 1 <= spec.ci_tile <= max(1, conv_epilogue_staged_channels(spec.kernel, spec.stride, spec.ci_tile)):
        raise ValueError(f"{name}: {spec.ci_tile} staged input channels do not fit the block's shared memory")
    others = [k for k in range(len(ew.inputs)) if k != spec.operand]
    nout = len(ew.outputs)
    out_t = CUDA_TYPE[ew.out_dtype]
    fn = compile_ops(f"{name}_f", tuple(t.name for t in ew.inputs), ew.ops, ew.outputs)

    params = [f"const {CUDA_TYPE[ew.inputs[k].dtype]}* __restrict__ in{k}, const __grid_constant__ KsOperand d{k}"
              for k in others] + [f"{out_t}* __restrict__ out{k}" for k in range(nout)]
    # operand k's value for output index idx (plane orow, position s): constant along the plane
    # (hoisted: h), at b + s (full, or rows of the plane), else through its descriptor
    hoists = _JOIN.join(
        f"const int64_t b{k} = d{k}.mode == KS_STRIDED ? -1 : ks_row_base_any(d{k}, orow, S); "
        f"const bool h{k} = b{k} >= 0 && d{k}.mode != KS_FULL && d{k}.mode != KS_ROW; "
        f"const float v{k} = h{k} ? ks_ld(in{k} + b{k}) : 0.f;" for k in others) or "(void)orow;"
    loads = _JOIN.join(
        f"float a{k}[1] = {{acc[i][j]}};" if k == spec.operand else
        f"float a{k}[1]; if (h{k}) a{k}[0] = v{k}; else if (b{k} >= 0) a{k}[0] = ks_ld(in{k} + b{k} + s); "
        f"else a{k}[0] = ks_ld(in{k} + ks_row_any_offset(d{k}, idx));" for k in range(len(ew.inputs)))
    call_args = [f"a{k}[0]" for k in range(len(ew.inputs))] + [f"r{k}[0]" for k in range(nout)]
    launcher_sig = (
        f"void {name}_launch(const float* x, const float* w, "
        + "".join(f"const void* in{k}, KsOperand d{k}, " for k in others)
        + "".join(f"void* out{k}, " for k in range(nout))
        + "int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Co, int64_t Ho, int64_t Wo, cudaStream_t stream)")
    kernel_args = "".join(f"static_cast<const {CUDA_TYPE[ew.inputs[k].dtype]}*>(in{k}), d{k}, " for k in others)
    kernel_args += "".join(f"static_cast<{out_t}*>(out{k}), " for k in range(nout))
    cuda = render(
        "conv_epilogue/kernel.cu", name=name, kh=kh, kw=kw, sh=sh, sw=sw, ph=ph, pw=pw, ci_tile=spec.ci_tile,
        warps=CONV_EPILOGUE_WARPS, rows=CONV_EPILOGUE_ROWS, cols=CONV_EPILOGUE_COLS,
        device_fn=fn.source, params="".join(p + ", " for p in params), hoists=hoists, loads=loads,
        outs=" ".join(f"float r{k}[1];" for k in range(nout)), call_args=", ".join(call_args),
        stores=" ".join(f"out{k}[idx] = ks_from_float<{out_t}>(r{k}[0]);" for k in range(nout)),
        launcher_sig=launcher_sig, kernel_args=kernel_args)

    checks = "\n  ".join(
        f'ks_check_tensor(in_{k}, "{name}: epilogue input {k} ({ew.inputs[k].name})", '
        f'{TORCH_DTYPE[ew.inputs[k].dtype]}, device);' for k in others)
    shape_checks = "\n  ".join(
        f'TORCH_CHECK(ks_broadcasts_to(in_{k}, s), "{name}: operand {k} '
        f'({ew.inputs[k].name}) of shape ", ks_str(in_{k}.sizes()), " does not broadcast to the output ", ks_str(s));'
        for k in others)
    describe = "\n  ".join(f"ks_describe(in_{k}, s, 1, descs[{j}]);  // may materialise it: pointers after"
                           for j, k in enumerate(others))
    launch_args = "".join(f"in_{k}.data_ptr(), descs[{j}], " for j, k in enumerate(others))
    launch_args += "".join(f"out_{k}.data_ptr(), " for k in range(nout))
    if nout == 1:
        ret_type, ret = "at::Tensor", "out_0"
    else:
        ret_type, ret = "std::vector<at::Tensor>", "{" + ", ".join(f"out_{k}" for k in range(nout)) + "}"
    binding = render(
        "conv_epilogue/binding.cpp", name=name, kh=kh, kw=kw, sh=sh, sw=sw, ph2=2 * ph, pw2=2 * pw,
        returns="one tensor" if nout == 1 else f"{nout} tensors", ret_type=ret_type, ret=ret,
        cparams=", ".join(["at::Tensor x", "at::Tensor weight", *(f"at::Tensor in_{k}" for k in others)]),
        x_name=spec.x.name, w_name=spec.weight.name, checks=checks, shape_checks=shape_checks,
        outs_alloc="\n  ".join(f"at::Tensor out_{k} = at::empty(shape, x.options().dtype({TORCH_DTYPE[ew.out_dtype]}));"
                               for k in range(nout)),
        ndesc=max(1, len(others)), describe=describe, launch_args=launch_args)
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=launcher_sig + ";",
        python_args=(spec.x.name, spec.weight.name, *(ew.inputs[k].name for k in others)),
        notes=(f"a {kh} x {kw} convolution computed directly in fp32 (input tile and 32 output channels' "
               "weights in shared memory, 8 channels x 8 rows a thread), the elementwise chain applied "
               "in registers: its output never stored",
               "epilogue operands through run-time descriptors, those constant along a plane loaded once"),
    )
