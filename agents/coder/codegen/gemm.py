"""GEMM emitter: y = act(x @ W^T + bias) through cuBLASLt with the epilogue fused
(DEFAULT / BIAS / RELU(_BIAS) / GELU(_BIAS)).

cuBLASLt's GELU epilogue is the tanh approximation, so it serves activation "gelu_tanh"; exact
("gelu", erf) GELU runs the bias epilogue and then one in-place vectorised pass emitted here.

The work is in the binding (compiled with torch's headers, linked with -lcublasLt): torch's current
stream, one cached cuBLASLt handle per device, a workspace from the torch allocator, fp32 compute
(TF32 only when torch allows it for cuBLAS), x [..., K] flattened to [M, K], and the row-major
problem mapped onto column-major cuBLASLt by computing y^T = W x^T.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.common import (
    CUDA_PRELUDE,
    CUDA_TYPE,
    TORCH_DTYPE,
    check_identifier,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.plan.kernel_spec import (
    GemmSpec,
)

GEMM_WORKSPACE_BYTES = 32 * 1024 * 1024  # cuBLASLt's recommendation for Hopper

GEMM_PRELUDE = r"""
#ifndef KS_GEMM_PRELUDE_H
#define KS_GEMM_PRELUDE_H
#include <cublasLt.h>
#include <ATen/Context.h>
#include <mutex>

#define KS_CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                          \
    const cublasStatus_t ks_status = (expr);                                                    \
    TORCH_CHECK(ks_status == CUBLAS_STATUS_SUCCESS, "cuBLASLt: " #expr " failed with status ", \
                ks_str((int64_t)ks_status));                                                    \
  } while (0)

static inline cublasLtHandle_t ks_cublaslt_handle(int device) {
  static std::mutex mu;
  static cublasLtHandle_t handles[64] = {nullptr};
  TORCH_CHECK(device >= 0 && device < 64, "cuBLASLt handle cache: device index ", ks_str(device));
  std::lock_guard<std::mutex> lock(mu);
  if (handles[device] == nullptr) KS_CUBLAS_CHECK(cublasLtCreate(&handles[device]));
  return handles[device];
}

static inline cudaDataType_t ks_cuda_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return CUDA_R_32F;
    case at::kHalf: return CUDA_R_16F;
    case at::kBFloat16: return CUDA_R_16BF;
    default: TORCH_CHECK(false, "cuBLASLt GEMM: unsupported dtype ", t);
  }
  return CUDA_R_32F;
}

static inline uint32_t ks_alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

// Owns the cuBLASLt descriptors of one call (destroyed on every exit path, errors included).
struct KsLtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~KsLtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// y2[M, N] = epilogue(x2[M, K] @ op(w) + bias), all row-major and contiguous.  Column-major
// cuBLASLt sees y2^T [N, M] = op(w)^T [N, K] * x2^T [K, M]; the bias runs along N (its rows).
static inline void ks_gemm_lt(const at::Tensor& x2, const at::Tensor& w, const at::Tensor* bias,
                              at::Tensor& y2, bool w_kn, cublasLtEpilogue_t epilogue, cudaStream_t stream) {
  const int64_t M = x2.size(0), K = x2.size(1), N = y2.size(1);
  const cudaDataType_t dtype = ks_cuda_dtype(x2.scalar_type());
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (x2.scalar_type() == at::kFloat && at::globalContext().allowTF32CuBLAS()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  KsLtCall call;
  KS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = w_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (bias != nullptr) {
    const void* bias_ptr = bias->data_ptr();
    KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr)));
  }
  if (w_kn) KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, dtype, N, K, N));  // W [K, N] row-major
  else KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, dtype, K, N, K));       // W [N, K] row-major
  KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.b, dtype, K, M, K));
  KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, dtype, N, M, N));

  const uint64_t ws_bytes = GEMM_WS_BYTES;
  at::Tensor workspace = at::empty({(int64_t)ws_bytes}, x2.options().dtype(at::kByte));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  const uint32_t al_a = ks_alignment(w.data_ptr()), al_b = ks_alignment(x2.data_ptr()), al_c = ks_alignment(y2.data_ptr());
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));

  const cublasLtHandle_t handle = ks_cublaslt_handle(x2.get_device());
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  KS_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, call.op, call.a, call.b, call.c, call.c, call.pref, 1, &heuristic, &found));
  TORCH_CHECK(found > 0, "cuBLASLt found no algorithm for M=", ks_str(M), " N=", ks_str(N), " K=", ks_str(K), " epilogue ", ks_str((int64_t)epilogue));
  const float alpha = 1.0f, beta = 0.0f;
  KS_CUBLAS_CHECK(cublasLtMatmul(handle, call.op, &alpha, w.data_ptr(), call.a, x2.data_ptr(), call.b, &beta,
                                 y2.data_ptr(), call.c, y2.data_ptr(), call.c, &heuristic.algo,
                                 workspace.data_ptr(), ws_bytes, stream));
}
#endif  // KS_GEMM_PRELUDE_H
""".replace("GEMM_WS_BYTES", f"{GEMM_WORKSPACE_BYTES}ull")


def _epilogue(activation: str, has_bias: bool) -> str:
    act = {"none": "", "relu": "RELU", "gelu_tanh": "GELU", "gelu": ""}[activation]
    if has_bias:
        return f"CUBLASLT_EPILOGUE_{act + '_' if act else ''}BIAS"
    return f"CUBLASLT_EPILOGUE_{act}" if act else "CUBLASLT_EPILOGUE_DEFAULT"


def emit_gemm(spec: GemmSpec) -> KernelSource:
    name = check_identifier(spec.name)
    dtypes = {spec.x.dtype, spec.weight.dtype, spec.out_dtype} | ({spec.bias.dtype} if spec.bias else set())
    if len(dtypes) != 1:
        raise ValueError(f"{name}: cuBLASLt GEMM needs one dtype for x, weight, bias and output, got {sorted(dtypes)}")
    if spec.activation not in ("none", "relu", "gelu", "gelu_tanh"):
        raise ValueError(f"{name}: unknown activation {spec.activation!r}")
    dtype = spec.out_dtype
    torch_dtype = TORCH_DTYPE[dtype]
    exact_gelu = spec.activation == "gelu"
    has_bias = spec.bias is not None
    epilogue = _epilogue(spec.activation, has_bias)
    w_kn = "true" if spec.weight_layout == "kn" else "false"

    launcher_sig = f"void {name}_gelu_launch(void* y, int64_t n, cudaStream_t stream)"
    if exact_gelu:
        t = CUDA_TYPE[dtype]
        vec = 16 // {"float32": 4, "float16": 2, "bfloat16": 2}[dtype]
        cuda = f"""{CUDA_PRELUDE}
// ---- {name}: exact (erf) GELU after the cuBLASLt bias epilogue, in place ----
__global__ void __launch_bounds__(256) {name}_gelu_kernel({t}* __restrict__ y, const int64_t n) {{
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
  const int64_t nvec = n / {vec};
  for (int64_t v = tid; v < nvec; v += step) {{
    float a[{vec}];
    ks_ld_vec<{vec}>(y + v * {vec}, a);
#pragma unroll
    for (int k = 0; k < {vec}; ++k) a[k] = ks_gelu(a[k]);
    ks_st_vec<{vec}>(y + v * {vec}, a);
  }}
  const int64_t i = nvec * {vec} + tid;
  if (i < n) y[i] = ks_from_float<{t}>(ks_gelu(ks_to_float(y[i])));
}}

{launcher_sig} {{
  if (n <= 0) return;
  static const int per_sm = ks_blocks_per_sm({name}_gelu_kernel, 256);
  const int64_t blocks = ks_grid(per_sm, ks_cdiv(n / {vec} > 0 ? n / {vec} : 1, 256));
  {name}_gelu_kernel<<<(unsigned)blocks, 256, 0, stream>>>(static_cast<{t}*>(y), n);
}}
"""
        decl = launcher_sig + ";"
    else:
        cuda = f"// ---- {name}: cuBLASLt GEMM, epilogue {epilogue}; all work is in the binding ----\n"
        decl = f"// {name}: no CUDA launcher (cuBLASLt only)"

    bias_param = ", at::Tensor bias" if has_bias else ""
    bias_checks = ""
    if has_bias:
        bias_checks = f"""
  ks_check_tensor(bias, "{name}: bias", {torch_dtype}, device);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == N, "{name}: bias must have shape [", ks_str(N), "], got ", ks_str(bias.sizes()));
  if (!bias.is_contiguous() || (reinterpret_cast<uintptr_t>(bias.data_ptr()) & 15u)) bias = bias.clone(at::MemoryFormat::Contiguous);"""
    binding = f"""{GEMM_PRELUDE}
// ---- binding {name}: y = {spec.activation}(x @ W{"" if spec.weight_layout == "kn" else "^T"}{" + bias" if has_bias else ""}) via cuBLASLt ----
at::Tensor {name}(at::Tensor x, at::Tensor weight{bias_param}) {{
  TORCH_CHECK(x.is_cuda(), "{name}: expected CUDA tensors");
  const at::Device device = x.device();
  ks_check_tensor(x, "{name}: x", {torch_dtype}, device);
  ks_check_tensor(weight, "{name}: weight", {torch_dtype}, device);
  TORCH_CHECK(x.dim() >= 1, "{name}: x must have at least one dimension");
  TORCH_CHECK(weight.dim() == 2, "{name}: weight must be 2-d, got ", ks_str(weight.sizes()));
  const int64_t K = x.size(-1);
  const bool w_kn = {w_kn};
  TORCH_CHECK(weight.size(w_kn ? 0 : 1) == K, "{name}: x has K=", ks_str(K), " but weight is ", ks_str(weight.sizes()));
  const int64_t N = weight.size(w_kn ? 1 : 0);{bias_checks}
  const c10::cuda::CUDAGuard guard(device);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(N);
  at::Tensor y = at::empty(out_shape, x.options());
  if (y.numel() == 0) return y;
  TORCH_CHECK(K > 0, "{name}: K must be positive");
  const int64_t M = y.numel() / N;
  at::Tensor x2 = x.reshape({{M, K}});
  if (!x2.is_contiguous()) x2 = x2.contiguous();
  if (!weight.is_contiguous()) weight = weight.contiguous();
  at::Tensor y2 = y.view({{M, N}});
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  ks_gemm_lt(x2, weight, {"&bias" if has_bias else "nullptr"}, y2, w_kn, {epilogue}, stream);{
        f'''
  {name}_gelu_launch(y.data_ptr(), y.numel(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();''' if exact_gelu else ""}
  return y;
}}
"""
    return KernelSource(
        function=name,
        cuda=cuda,
        binding=binding,
        launcher_decl=decl,
        python_args=("x", "weight") + (("bias",) if has_bias else ()),
        notes=(
            f"cuBLASLt matmul, epilogue {epilogue}" + (" + in-place exact GELU pass" if exact_gelu else ""),
            "fp32 compute (TF32 only if torch allows it), torch stream, cached handle, torch-allocated workspace",
        ),
    )
