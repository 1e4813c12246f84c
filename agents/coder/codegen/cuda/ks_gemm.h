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

// The tensor cores' math for fp32 operands (the plan's precision, kernelstitch/core/precision.py):
// FP32 follows torch's allow_tf32 for cuBLAS, as torch's own matmul does (the Verifier turns it
// off); TF32 / BF16 / FP16 are the user's opt-in: fp32 in and out, products in that precision.
enum KsGemmMath { KS_GEMM_MATH_FP32, KS_GEMM_MATH_TF32, KS_GEMM_MATH_BF16, KS_GEMM_MATH_FP16 };

static inline cublasComputeType_t ks_gemm_compute(at::ScalarType type, KsGemmMath math) {
  if (type != at::kFloat) return CUBLAS_COMPUTE_32F;  // 16-bit operands: tensor cores already
  switch (math) {
    case KS_GEMM_MATH_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case KS_GEMM_MATH_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
    case KS_GEMM_MATH_FP16: return CUBLAS_COMPUTE_32F_FAST_16F;
    default: return at::globalContext().allowTF32CuBLAS() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }
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
                              at::Tensor& y2, bool w_kn, cublasLtEpilogue_t epilogue, cudaStream_t stream,
                              KsGemmMath math = KS_GEMM_MATH_FP32) {
  const int64_t M = x2.size(0), K = x2.size(1), N = y2.size(1);
  const cudaDataType_t dtype = ks_cuda_dtype(x2.scalar_type());
  const cublasComputeType_t compute = ks_gemm_compute(x2.scalar_type(), math);
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

  const uint64_t ws_bytes = 33554432ull;
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
