
// ---- binding {{name}}: {{kh}} x {{kw}} convolution + {{what}}, returns {{returns}} ----
{{ret_type}} {{name}}({{cparams}}) {
  TORCH_CHECK(x.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = x.device();
  ks_check_tensor(x, "{{name}}: conv input ({{x_name}})", at::kFloat, device);
  ks_check_tensor(weight, "{{name}}: conv weight ({{w_name}})", at::kFloat, device);
  {{checks}}
  TORCH_CHECK(x.dim() == 4, "{{name}}: the conv input must be [N, C, H, W], got ", ks_str(x.dim()), " dims");
  TORCH_CHECK(weight.dim() == 4 && weight.size(1) == x.size(1) && weight.size(2) == {{kh}} && weight.size(3) == {{kw}},
              "{{name}}: the weight must be [C_out, ", ks_str(x.size(1)), ", {{kh}}, {{kw}}], got ", ks_str(weight.sizes()));
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3), Co = weight.size(0);
  // the conv's output size (torch's formula; dilation 1)
  const int64_t Ho = H + {{ph2}} >= {{kh}} ? (H + {{ph2}} - {{kh}}) / {{sh}} + 1 : 0;
  const int64_t Wo = W + {{pw2}} >= {{kw}} ? (W + {{pw2}} - {{kw}}) / {{sw}} + 1 : 0;
  TORCH_CHECK(N <= 65535 && Cin < (1LL << 24) && H < (1LL << 30) && W < (1LL << 30),
              "{{name}}: sizes out of the kernel's range: ", ks_str(x.sizes()));
  const c10::cuda::CUDAGuard guard(device);
  const std::vector<int64_t> shape = {N, Co, Ho, Wo};
  const c10::IntArrayRef s(shape);
  {{pooled}}
  {{shape_checks}}
  at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  {{outs_alloc}}
  if (out_0.numel() == 0) return {{ret}};
  KsOperand descs[{{ndesc}}];
  {{describe}}
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(static_cast<const float*>(xc.data_ptr()), static_cast<const float*>(wc.data_ptr()),
                  {{launch_args}}N, Cin, H, W, Co, Ho, Wo, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {{ret}};
}
