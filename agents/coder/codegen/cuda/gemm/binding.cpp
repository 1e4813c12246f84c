
#include "../ks_gemm.h"

// ---- binding {{name}}: y = {{activation}}(x @ {{w_expr}}{{bias_expr}}) via cuBLASLt ----
at::Tensor {{name}}(at::Tensor x, at::Tensor weight{{bias_param}}) {
  TORCH_CHECK(x.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = x.device();
  ks_check_tensor(x, "{{name}}: x", {{torch_dtype}}, device);
  ks_check_tensor(weight, "{{name}}: weight", {{torch_dtype}}, device);
  TORCH_CHECK(x.dim() >= 1, "{{name}}: x must have at least one dimension");
  TORCH_CHECK(weight.dim() == 2, "{{name}}: weight must be 2-d, got ", ks_str(weight.sizes()));
  const int64_t K = x.size(-1);
  const bool w_kn = {{w_kn}};
  TORCH_CHECK(weight.size(w_kn ? 0 : 1) == K, "{{name}}: x has K=", ks_str(K), " but weight is ", ks_str(weight.sizes()));
  const int64_t N = weight.size(w_kn ? 1 : 0);{{bias_checks}}
  const c10::cuda::CUDAGuard guard(device);
  std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(N);
  at::Tensor y = at::empty(out_shape, x.options());
  if (y.numel() == 0) return y;
  TORCH_CHECK(K > 0, "{{name}}: K must be positive");
  const int64_t M = y.numel() / N;
  at::Tensor x2 = x.reshape({M, K});{{contiguous_operands}}
  at::Tensor y2 = y.view({M, N});
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{gemm_call}}{{gelu_launch}}
  return y;
}

