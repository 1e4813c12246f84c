"""Elementwise emitter: one grid-stride pass computing every output of a fused op chain.

Two instantiations of one kernel template: VEC = 16 bytes of the narrowest dtype (float4 /
8 x half) when every full-size operand is 16-byte aligned, VEC = 1 otherwise (the binding decides
at run time).  Broadcast operands are read through run-time descriptors (`KsOperand`): full,
scalar, row vector, per-channel, or general strides.
"""

from __future__ import annotations

from kernelstitch.agents.codegen.common import (
    CUDA_PRELUDE,
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    vector_width,
)
from kernelstitch.agents.codegen.expr import compile_ops
from kernelstitch.agents.codegen.spec import ElementwiseSpec, KernelSource

THREADS = 256


def emit_elementwise(spec: ElementwiseSpec) -> KernelSource:
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

    def step(width: str, index: str) -> str:
        lines = [f"float a{k}[{width}]; ks_load<{width}>(in{k}, d{k}, {index}, a{k});" for k in range(nin)]
        lines += [f"float r{k}[{width}];" for k in range(nout)]
        call_args = [f"a{k}[j]" for k in range(nin)] + [f"r{k}[j]" for k in range(nout)]
        lines.append("#pragma unroll")
        lines.append(f"for (int j = 0; j < {width}; ++j) {name}_f({', '.join(call_args)});")
        lines += [f"ks_st_vec<{width}>(out{k} + {index}, r{k});" for k in range(nout)]
        return "\n      ".join(lines)

    kernel_args = [f"static_cast<const {ty}*>(ins[{k}]), descs[{k}]" for k, ty in enumerate(in_types)]
    kernel_args += [f"static_cast<{out_t}*>(outs[{k}])" for k in range(nout)]
    kernel_args.append("n")
    launcher_sig = (
        f"void {name}_launch(const void* const* ins, const KsOperand* descs, void* const* outs, "
        f"int64_t n, int vec, cudaStream_t stream)"
    )

    cuda = f"""{CUDA_PRELUDE}
// ---- elementwise kernel {name} ----
{fn.source}
template <int VEC>
__global__ void __launch_bounds__({THREADS}) {name}_kernel({", ".join(params)}) {{
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nvec = n / VEC;
  for (int64_t v = tid; v < nvec; v += step) {{
    const int64_t i = v * VEC;
    {{
      {step("VEC", "i")}
    }}
  }}
  if constexpr (VEC > 1) {{
    const int64_t i = nvec * VEC + tid;  // tail: fewer than VEC elements left
    if (i < n) {{
      {step("1", "i")}
    }}
  }}
}}

{launcher_sig} {{
  if (n <= 0) return;
  if (vec == {vec}) {{
    static const int per_sm = ks_blocks_per_sm({name}_kernel<{vec}>, {THREADS});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(n / {vec} > 0 ? n / {vec} : 1, {THREADS}));
    {name}_kernel<{vec}><<<(unsigned)blocks, {THREADS}, 0, stream>>>({", ".join(kernel_args)});
  }} else {{
    static const int per_sm = ks_blocks_per_sm({name}_kernel<1>, {THREADS});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(n, {THREADS}));
    {name}_kernel<1><<<(unsigned)blocks, {THREADS}, 0, stream>>>({", ".join(kernel_args)});
  }}
}}
"""

    cparams = ", ".join(f"at::Tensor in_{k}" for k in range(nin))
    ins_list = ", ".join(f"in_{k}" for k in range(nin))
    checks = "\n  ".join(
        f'ks_check_tensor(in_{k}, "{name}: input {k} ({t.name})", {TORCH_DTYPE[t.dtype]}, device);'
        for k, t in enumerate(spec.inputs)
    )
    outs_alloc = "\n  ".join(
        f"at::Tensor out_{k} = at::empty(shape, in_0.options().dtype({TORCH_DTYPE[spec.out_dtype]}));"
        for k in range(nout)
    )
    out_ptrs = ", ".join(f"out_{k}.data_ptr()" for k in range(nout))
    if nout == 1:
        ret_type, ret = "at::Tensor", "out_0"
    else:
        ret_type, ret = "std::vector<at::Tensor>", "{" + ", ".join(f"out_{k}" for k in range(nout)) + "}"
    binding = f"""
// ---- binding {name}: elementwise, returns {"one tensor" if nout == 1 else f"{nout} tensors"} ----
{ret_type} {name}({cparams}) {{
  TORCH_CHECK(in_0.is_cuda(), "{name}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {checks}
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = ks_broadcast_shape({{{ins_list}}});
  {outs_alloc}
  const int64_t n = out_0.numel();
  if (n == 0) return {ret};
  KsOperand descs[{nin}];
  const c10::IntArrayRef s(shape);
  const int vec = ks_describe_all({{{", ".join(f"&in_{k}" for k in range(nin))}}}, {{{", ".join("s" for _ in range(nin))}}}, {vec}, descs);
  const void* ins[{nin}] = {{{", ".join(f"in_{k}.data_ptr()" for k in range(nin))}}};
  void* outs[{nout}] = {{{out_ptrs}}};
  {name}_launch(ins, descs, outs, n, vec, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {ret};
}}
"""
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=launcher_sig + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            f"elementwise: {vec}-wide 16-byte vector path + scalar path chosen at run time by alignment",
            "grid-stride loop, grid sized from SM count x occupancy, 64-bit indices (32-bit division fast path)",
            "broadcast operands through run-time descriptors (full/scalar/row/channel/strided)",
        ),
    )
