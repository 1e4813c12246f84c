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

// One GEMM's operands as cuBLASLt sees them: row-major y[M, N] (ld N) = x[M, K] (ld ldx) @ op(w), w
// [K, N] (w_kn, ld ldw >= N) or [N, K] (ld ldw >= K).  Column-major cuBLASLt computes y^T [N, M] =
// op(w)^T [N, K] * x^T [K, M]; the bias runs along N (its rows).
struct KsGemmShape {
  const void* w; int64_t ldw;
  const void* x; int64_t ldx;
  void* y;
  int64_t M, N, K;
  bool w_kn;
};

static inline void ks_gemm_lt_raw(const KsGemmShape& g, at::ScalarType type, const void* bias,
                                  cublasLtEpilogue_t epilogue, cudaStream_t stream, KsGemmMath math,
                                  float beta, const at::Tensor& workspace, int device) {
  const cudaDataType_t dtype = ks_cuda_dtype(type);
  const cublasComputeType_t compute = ks_gemm_compute(type, math);
  KsLtCall call;
  KS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = g.w_kn ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (bias != nullptr)
    KS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  if (g.w_kn) KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, dtype, g.N, g.K, g.ldw));  // W [K, N] row-major
  else KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.a, dtype, g.K, g.N, g.ldw));         // W [N, K] row-major
  KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.b, dtype, g.K, g.M, g.ldx));
  KS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, dtype, g.N, g.M, g.N));

  const uint64_t ws_bytes = (uint64_t)workspace.numel();
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  const uint32_t al_a = ks_alignment(g.w), al_b = ks_alignment(g.x), al_c = ks_alignment(g.y);
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  KS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));

  const cublasLtHandle_t handle = ks_cublaslt_handle(device);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  KS_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, call.op, call.a, call.b, call.c, call.c, call.pref, 1, &heuristic, &found));
  TORCH_CHECK(found > 0, "cuBLASLt found no algorithm for M=", ks_str(g.M), " N=", ks_str(g.N), " K=", ks_str(g.K),
              " epilogue ", ks_str((int64_t)epilogue));
  const float alpha = 1.0f;  // beta 1 accumulates into y (3xTF32's later products)
  KS_CUBLAS_CHECK(cublasLtMatmul(handle, call.op, &alpha, g.w, call.a, g.x, call.b, &beta, g.y, call.c, g.y, call.c,
                                 &heuristic.algo, workspace.data_ptr(), ws_bytes, stream));
}

static inline at::Tensor ks_gemm_workspace(const at::Tensor& like) {
  return at::empty({(int64_t)33554432}, like.options().dtype(at::kByte));  // 32 MiB, cuBLASLt's advice for Hopper
}

// y2[M, N] = epilogue(x2[M, K] @ op(w) + bias), all row-major and contiguous.
static inline void ks_gemm_lt(const at::Tensor& x2, const at::Tensor& w, const at::Tensor* bias,
                              at::Tensor& y2, bool w_kn, cublasLtEpilogue_t epilogue, cudaStream_t stream,
                              KsGemmMath math = KS_GEMM_MATH_FP32) {
  const int64_t M = x2.size(0), K = x2.size(1), N = y2.size(1);
  const KsGemmShape g{w.data_ptr(), w_kn ? N : K, x2.data_ptr(), K, y2.data_ptr(), M, N, K, w_kn};
  ks_gemm_lt_raw(g, x2.scalar_type(), bias ? bias->data_ptr() : nullptr, epilogue, stream, math, 0.0f,
                 ks_gemm_workspace(x2), x2.get_device());
}

// The splitting pass of 3xTF32 (cuda/gemm/split_tf32.cu): src [rows, len] with strides (src_rs,
// src_ks) -> rows of ld_out holding hi (TF32-exact) at hi_off + k and lo (the remainder) at lo_off + k.
typedef void (*KsSplitLaunch)(const void* src, void* dst, int64_t rows, int64_t len, int64_t src_rs, int64_t src_ks,
                              int64_t ld_out, int64_t hi_off, int64_t lo_off, cudaStream_t stream);

// K columns of the high-part product accumulated on the tensor cores before fp32 takes over (below).
#define KS_SPLIT_TF32_CHUNK_K 1024

// An fp32 GEMM at fp32's accuracy on TF32 tensor cores (3xTF32).  Each operand is split into a
// TF32-exact high part and its remainder: x W = x_hi W_hi + (x_lo W_hi + x_hi W_lo) + x_lo W_lo,
// the last ~2^-22 of the product (dropped).  The middle terms are one GEMM over K' = 2K of the split
// buffers laid side by side (x_cat = [x_lo | x_hi], W_cat = [W_hi | W_lo] along K).  The tensor
// cores accumulate with truncation, an error that grows with the number of accumulations; so the
// high-part product runs in K chunks of KS_SPLIT_TF32_CHUNK_K, each added to y in cuBLASLt's fp32
// epilogue (beta 1), the last with the bias and activation.
// x2 and w may be strided (a transposed operand): the splitting pass reads them in place, so no
// PyTorch copy runs before it.
static inline void ks_gemm_split_tf32(const at::Tensor& x2, const at::Tensor& w, const at::Tensor* bias,
                                      at::Tensor& y2, bool w_kn, cublasLtEpilogue_t epilogue,
                                      cudaStream_t stream, KsSplitLaunch split) {
  TORCH_CHECK(x2.scalar_type() == at::kFloat, "3xTF32 GEMM: fp32 operands only");
  TORCH_CHECK(x2.dim() == 2 && w.dim() == 2, "3xTF32 GEMM: 2-d operands");
  const int64_t M = x2.size(0), K = x2.size(1), N = y2.size(1);
  at::Tensor x_cat = at::empty({M, 2 * K}, x2.options());
  at::Tensor w_cat = at::empty({2 * w.numel()}, w.options());
  split(x2.data_ptr(), x_cat.data_ptr(), M, K, x2.stride(0), x2.stride(1), 2 * K, K, 0, stream);  // [x_lo | x_hi]
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (w_kn) split(w.data_ptr(), w_cat.data_ptr(), K, N, w.stride(0), w.stride(1), N, 0, K * N, stream);  // [W_hi ; W_lo]
  else split(w.data_ptr(), w_cat.data_ptr(), N, K, w.stride(0), w.stride(1), 2 * K, 0, K, stream);        // [W_hi | W_lo]
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const at::Tensor workspace = ks_gemm_workspace(x2);
  const int device = x2.get_device();
  const float* xc = x_cat.data_ptr<float>();
  const float* wc = w_cat.data_ptr<float>();
  const int64_t ldw = w_kn ? N : 2 * K;
  // x_lo W_hi + x_hi W_lo: one product over the 2K columns of the side-by-side buffers
  ks_gemm_lt_raw(KsGemmShape{wc, ldw, xc, 2 * K, y2.data_ptr(), M, N, 2 * K, w_kn}, at::kFloat, nullptr,
                 CUBLASLT_EPILOGUE_DEFAULT, stream, KS_GEMM_MATH_TF32, 0.0f, workspace, device);
  for (int64_t k0 = 0; k0 < K; k0 += KS_SPLIT_TF32_CHUNK_K) {  // + x_hi W_hi, chunk by chunk
    const int64_t kc = std::min<int64_t>(KS_SPLIT_TF32_CHUNK_K, K - k0);
    const bool last = k0 + kc >= K;
    const float* w_hi = w_kn ? wc + k0 * N : wc + k0;
    ks_gemm_lt_raw(KsGemmShape{w_hi, ldw, xc + K + k0, 2 * K, y2.data_ptr(), M, N, kc, w_kn}, at::kFloat,
                   last && bias ? bias->data_ptr() : nullptr, last ? epilogue : CUBLASLT_EPILOGUE_DEFAULT, stream,
                   KS_GEMM_MATH_TF32, 1.0f, workspace, device);
  }
}
#endif  // KS_GEMM_PRELUDE_H
