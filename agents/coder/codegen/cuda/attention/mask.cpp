ks_check_tensor(mask, "{{name}}: attention mask ({{mask_name}})", {{mask_dtype}}, device);
  std::vector<int64_t> full(lead.begin(), lead.end());
  full.push_back(Lq);
  full.push_back(Lk);
  TORCH_CHECK(mask.dim() <= rank, "{{name}}: the mask has more dims (", ks_str(mask.dim()), ") than the query");
  const at::Tensor mask3 = mask.expand(full).reshape({N, Lq, Lk});  // broadcast dims keep stride 0
  const void* mask_ptr = mask3.data_ptr();
  const int64_t sm0 = mask3.stride(0), sm1 = mask3.stride(1), sm2 = mask3.stride(2);
