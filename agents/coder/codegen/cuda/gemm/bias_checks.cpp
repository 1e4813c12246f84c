
  ks_check_tensor(bias, "{{name}}: bias", {{torch_dtype}}, device);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == N, "{{name}}: bias must have shape [", ks_str(N), "], got ", ks_str(bias.sizes()));
  if (!bias.is_contiguous() || (reinterpret_cast<uintptr_t>(bias.data_ptr()) & 15u)) bias = bias.clone(at::MemoryFormat::Contiguous);
