
// ---- binding {{name}}: conv tap means, {{kh}} x {{kw}} {{what}} ----
at::Tensor {{name}}(at::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "{{name}}: expected a CUDA tensor");
  const at::Device device = x.device();
  ks_check_tensor(x, "{{name}}: conv input ({{x_name}})", at::kFloat, device);
  TORCH_CHECK(x.dim() == 4, "{{name}}: the conv input must be [N, C, H, W], got ", ks_str(x.dim()), " dims");
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  TORCH_CHECK(H > 0 && W > 0, "{{name}}: empty spatial dims");
  // the conv's output size (torch's formulas)
  const int64_t Ho = {{out_h}}, Wo = {{out_w}};
  TORCH_CHECK(Ho > 0 && Wo > 0, "{{name}}: the convolution's output would be empty (", ks_str(Ho), " x ",
              ks_str(Wo), ")");
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor out = at::empty({C, N, {{taps}}}, x.options().dtype(at::kFloat));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(x.data_ptr(), x.stride(0), x.stride(1), x.stride(2), x.stride(3), N, C, H, W, Ho, Wo,
                  (float)(1.0 / ((double)Ho * (double)Wo)), out.data_ptr(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
