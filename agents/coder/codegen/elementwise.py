"""Elementwise emitter: one grid-stride pass computing every output of a fused op chain.

Two instantiations of one kernel template: VEC = 16 bytes of the narrowest dtype (float4 /
8 x half) when every full-size operand is 16-byte aligned, VEC = 1 otherwise (the binding decides
at run time).  Broadcast operands are read through run-time descriptors (`KsOperand`): full,
scalar, row vector, per-channel, or general strides.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_PRELUDE,
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
    vector_width,
)
from kernelstitch.agents.coder.codegen.expr import compile_ops
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.plan.kernel_spec import (
    ElementwiseSpec,
)

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

    nhwc_kernel, nhwc_launch = _channels_last_kernel(name, spec, params, kernel_args, out_t)
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

{nhwc_kernel}
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
{nhwc_launch}
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
    in_refs = ", ".join(f"&in_{k}" for k in range(nin))
    in_shapes = ", ".join("s" for _ in range(nin))
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
  const void* ins[{nin}] = {{{", ".join(f"in_{k}.data_ptr()" for k in range(nin))}}};
  void* outs[{nout}] = {{{out_ptrs}}};
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  // A full-size operand laid out channels-last (a cuDNN NHWC convolution's output) into the
  // contiguous output: the tiled transpose kernel, the other operands through descriptors.
  const int tiled = ks_channels_last_operand({{{in_refs}}}, s);
  if (tiled >= 0) {{
    ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, 1, descs);
    int64_t spatial = 1;
    for (size_t k = 2; k < shape.size(); ++k) spatial *= shape[k];
    {name}_launch_nhwc(ins, descs, outs, tiled, shape[0], shape[1], spatial, stream);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {ret};
  }}
  const int vec = ks_describe_all({{{in_refs}}}, {{{in_shapes}}}, {vec}, descs);
  {name}_launch(ins, descs, outs, n, vec, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {ret};
}}
"""
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=launcher_sig + ";\n" + nhwc_launch.split(" {", 1)[0] + ";",
        python_args=tuple(t.name for t in spec.inputs),
        notes=(
            f"elementwise: {vec}-wide 16-byte vector path + scalar path chosen at run time by alignment",
            "grid-stride loop, grid sized from SM count x occupancy, 64-bit indices (32-bit division fast path)",
            "broadcast operands through run-time descriptors (full/scalar/row/channel/strided)",
            "a channels-last operand into the contiguous output: 32x32 tiles through shared memory",
        ),
    )


def _channels_last_kernel(name: str, spec: ElementwiseSpec, params: list[str], kernel_args: list[str],
                          out_t: str) -> tuple[str, str]:
    """Kernel + launcher for one full-size operand stored channels-last ([N, C, S...] logically,
    [N, S..., C] in memory, e.g. a cuDNN NHWC convolution's output) while the output is the
    contiguous [N, C, S...]: each 32 x 32 (spatial, channel) tile is read along C and written
    along S through shared memory, so both sides are coalesced; a plain elementwise pass would
    read it 4 bytes per 512-byte stride.  TI, the tiled operand, is a template argument; the
    other operands are read through their descriptors at the output index."""
    nin, nout = len(spec.inputs), len(spec.outputs)
    loads = []
    for k in range(nin):
        loads.append(
            f"float a{k}[1]; if constexpr (TI == {k}) a{k}[0] = tile[tx][row]; "
            f"else ks_load<1>(in{k}, d{k}, i, a{k});"
        )
    fills = "\n      ".join(
        f"if constexpr (TI == {k}) tile[row][tx] = ks_to_float(in{k}[(nb * S + s) * C + c]);" for k in range(nin)
    )
    call_args = [f"a{k}[0]" for k in range(nin)] + [f"r{k}[0]" for k in range(nout)]
    stores = " ".join(f"out{k}[i] = ks_from_float<{out_t}>(r{k}[0]);" for k in range(nout))
    outs_decl = " ".join(f"float r{k}[1];" for k in range(nout))
    kparams = ", ".join(params[:-1]) + ", const int64_t C, const int64_t S"
    kernel = f"""
// Channels-last operand TI -> contiguous output (see _channels_last_kernel in elementwise.py).
template <int TI>
__global__ void __launch_bounds__(256) {name}_nhwc({kparams}) {{
  __shared__ float tile[32][33];  // +1: the transposed reads hit 32 different banks
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  const int64_t s0 = (int64_t)blockIdx.x * 32, c0 = (int64_t)blockIdx.y * 32, nb = blockIdx.z;
#pragma unroll
  for (int k = 0; k < 4; ++k) {{  // read along C
    const int row = ty + 8 * k;
    const int64_t s = s0 + row, c = c0 + tx;
    if (s < S && c < C) {{
      {fills}
    }}
  }}
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {{  // write along S
    const int row = ty + 8 * k;
    const int64_t c = c0 + row, s = s0 + tx;
    if (c < C && s < S) {{
      const int64_t i = (nb * C + c) * S + s;
      {" ".join(loads)}
      {outs_decl}
      {name}_f({", ".join(call_args)});
      {stores}
    }}
  }}
}}
"""
    args = ", ".join(kernel_args[:-1]) + ", C, S"
    cases = "\n".join(
        f"    case {k}: {name}_nhwc<{k}><<<grid, 256, 0, stream>>>({args}); break;" for k in range(nin)
    )
    launch = f"""void {name}_launch_nhwc(const void* const* ins, const KsOperand* descs, void* const* outs, int tiled,
    int64_t N, int64_t C, int64_t S, cudaStream_t stream) {{
  const dim3 grid((unsigned)ks_cdiv(S, 32), (unsigned)ks_cdiv(C, 32), (unsigned)N);
  switch (tiled) {{
{cases}
    default: break;
  }}
}}
"""
    return kernel, launch
