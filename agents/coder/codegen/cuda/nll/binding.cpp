
// ---- binding {{name}}: negative log-likelihood, reduction {{reduction}} ----
at::Tensor {{name}}(at::Tensor x, at::Tensor t, at::Tensor lse) {
  TORCH_CHECK(x.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = x.device();
  ks_check_tensor(x, "{{name}}: logits ({{x_name}})", {{x_dtype}}, device);
  ks_check_tensor(t, "{{name}}: targets ({{t_name}})", at::kLong, device);
  ks_check_tensor(lse, "{{name}}: row logsumexp ({{lse_name}})", {{lse_dtype}}, device);
  TORCH_CHECK(x.dim() == 2, "{{name}}: logits must be [N, C], got ", ks_str(x.dim()), " dims");
  const int64_t N = x.size(0), C = x.size(1);
  TORCH_CHECK(t.dim() == 1 && t.size(0) == N && lse.dim() == 1 && lse.size(0) == N,
              "{{name}}: targets and logsumexp must be [N] with N = ", ks_str(N));
  const c10::cuda::CUDAGuard guard(device);
  const at::Tensor tc = t.contiguous(), lc = lse.contiguous();
  at::Tensor out = at::empty({{out_shape}}, x.options().dtype({{out_dtype}}));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(x.data_ptr(), x.stride(0), x.stride(1), lc.data_ptr(), tc.data_ptr(), out.data_ptr(), N, C, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
