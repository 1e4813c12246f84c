
// ---- binding {{name}}: batch_norm statistics of a concatenation from its parts' ----
at::Tensor {{name}}({{cparams}}) {
  const at::Tensor* parts[{{parts}}] = {{{part_ptrs}}};
  const at::Tensor& sizes = in_{{parts}};
  TORCH_CHECK(sizes.is_cuda() && sizes.dim() >= 2, "{{name}}: expected a CUDA tensor of 2 or more dims, sizes ",
              ks_str(sizes.sizes()));
  const at::Device device = sizes.device();
  KsBnMergeParts p{};
  p.count = {{parts}};
  p.first[0] = 0;
  for (int j = 0; j < {{parts}}; ++j) {
    const at::Tensor& t = *parts[j];
    TORCH_CHECK(t.is_cuda() && t.device() == device && t.scalar_type() == at::kFloat && t.dim() == 2 &&
                t.size(0) == 2 && t.is_contiguous(), "{{name}}: part ", ks_str(j), " is not a [2, C] fp32 statistics tensor");
    p.part[j] = t.data_ptr<float>();
    p.first[j + 1] = p.first[j] + t.size(1);
  }
  const int64_t C = p.first[{{parts}}];
  int64_t M = sizes.size(0);  // values a channel: every dim but the channels'
  for (int64_t k = 2; k < sizes.dim(); ++k) M *= sizes.size(k);
  TORCH_CHECK(M != 1, "{{name}}: batch_norm in training mode needs more than 1 value per channel, got input sizes ",
              ks_str(sizes.sizes()));
  {{running_checks}}
  const c10::cuda::CUDAGuard guard(device);
  at::Tensor stats = at::empty({2, C}, sizes.options().dtype(at::kFloat));
  if (M == 0) return stats.zero_();  // an empty batch: nothing to update (as batch_stats)
  {{name}}_launch(p, stats.data_ptr<float>(), {{running_ptrs}}, C, {{eps}}, {{momentum}},
                  (float)((double)M / (double)(M - 1)), c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return stats;
}
