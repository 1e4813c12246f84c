
// ---- binding {{name}}: t's 3xTF32 parts side by side along `dim` ([lo, hi, hi], or [hi, lo, hi] for a weight) ----
at::Tensor {{name}}(at::Tensor t, int64_t dim, bool weight_order) {
  TORCH_CHECK(t.is_cuda(), "{{name}}: expected a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == at::kFloat, "{{name}}: 3xTF32 splits fp32 only, got ", t.scalar_type());
  TORCH_CHECK(dim >= 0 && dim < t.dim(), "{{name}}: dim ", ks_str(dim), " out of range for ", ks_str(t.dim()), " dims");
  const c10::cuda::CUDAGuard guard(t.device());
  if (!t.is_contiguous()) t = t.contiguous();
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[dim] *= 3;
  at::Tensor out = at::empty(shape, t.options());
  if (t.numel() == 0) return out;
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= t.size(d);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
  {{name}}_launch(t.data_ptr(), out.data_ptr(), outer, t.numel() / outer, weight_order, stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
