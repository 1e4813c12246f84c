// ---- binding {{name}}: flash attention ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(q.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = q.device();
  ks_check_tensor(q, "{{name}}: query ({{q_name}})", {{q_dtype}}, device);
  ks_check_tensor(k, "{{name}}: key ({{k_name}})", {{k_dtype}}, device);
  ks_check_tensor(v, "{{name}}: value ({{v_name}})", {{v_dtype}}, device);
  const int64_t rank = q.dim();
  TORCH_CHECK(rank >= 2 && k.dim() == rank && v.dim() == rank,
              "{{name}}: query, key and value need one rank >= 2, got ", ks_str(rank), ", ", ks_str(k.dim()), ", ",
              ks_str(v.dim()));
  const int64_t D = q.size(-1), Lq = q.size(-2), Lk = k.size(-2);
  TORCH_CHECK(D == {{head_dim}} && k.size(-1) == D && v.size(-1) == D,
              "{{name}}: compiled for head dim {{head_dim}} (query, key and value alike), got ", ks_str(D), ", ",
              ks_str(k.size(-1)), ", ", ks_str(v.size(-1)));
  TORCH_CHECK(v.size(-2) == Lk, "{{name}}: key and value lengths differ: ", ks_str(Lk), " and ", ks_str(v.size(-2)));
  const c10::IntArrayRef lead = q.sizes().slice(0, rank - 2);
  TORCH_CHECK(k.sizes().slice(0, rank - 2) == lead && v.sizes().slice(0, rank - 2) == lead,
              "{{name}}: query, key and value need the same leading (batch, head) sizes");
  const c10::cuda::CUDAGuard guard(device);
  int64_t N = 1;
  for (const int64_t s : lead) N *= s;
  // a block owns 64 query rows or more (both bodies): the kernel's 1-D grid must fit a grid's x
  // dimension (2^31 - 1 blocks)
  TORCH_CHECK(N * ((Lq + 63) / 64) <= INT32_MAX, "{{name}}: too many (batch x heads) x query tiles for one ",
              "launch: N = ", ks_str(N), ", Lq = ", ks_str(Lq));
  // [B, H, L, D] views, the head dim contiguous, B the leading dims merged (a copy only where
  // their strides do not allow it).  Where the kernel takes a head stride of its own, H is the
  // last leading dim, so the usual head-split view `x.view(b, t, h, d).transpose(1, 2)` is read
  // in place; else H is 1 (all leading dims merged)
  const int64_t heads = {{split_heads}} && rank >= 3 ? q.size(-3) : 1;
  auto rows = [&](const at::Tensor& t, int64_t L) {
    return (t.stride(-1) == 1 ? t : t.contiguous()).reshape({heads == 0 ? 0 : N / heads, heads, L, D});
  };
  const at::Tensor q4 = rows(q, Lq), k4 = rows(k, Lk), v4 = rows(v, Lk);
  at::Tensor out = at::empty(q.sizes(), q.options().dtype({{out_dtype}}));
  if (out.numel() == 0) return out;
  {{mask_setup}}
  // the live-tile map of a bool mask (one byte a tile of queries x keys, per n unless broadcast)
  const int64_t live_bytes = {{name}}_live_bytes(sm0 == 0 ? 1 : N, Lq, Lk);
  TORCH_CHECK(live_bytes <= INT32_MAX, "{{name}}: the mask's live-tile map (one block a tile) has ",
              ks_str(live_bytes), " tiles, more than one launch takes");
  at::Tensor live = at::empty({live_bytes > 0 ? live_bytes : 1}, q.options().dtype(at::kByte));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  {{name}}_launch(q4.data_ptr(), k4.data_ptr(), v4.data_ptr(), mask_ptr, out.data_ptr(), N, heads, Lq, Lk,
                  q4.stride(0), q4.stride(1), q4.stride(2), k4.stride(0), k4.stride(1), k4.stride(2), v4.stride(0),
                  v4.stride(1), v4.stride(2), sm0, sm1, sm2, live.data_ptr(), stream);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
