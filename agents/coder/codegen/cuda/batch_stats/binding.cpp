
// ---- binding {{name}}: batch_norm statistics (training mode) ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  TORCH_CHECK(in_0.dim() >= 2, "{{name}}: batch_norm of a tensor with fewer than 2 dims, sizes ", ks_str(in_0.sizes()));
  const int64_t rank = in_0.dim();
  KsBnGeom g{};
  g.N = in_0.size(0);
  g.C = in_0.size(1);
  g.S = 1;
  for (int64_t k = 2; k < rank; ++k) g.S *= in_0.size(k);
  g.M = g.N * g.S;
  if (g.M <= (int64_t)0xffffffffLL) g.fS = ks_fastdiv_make(g.S);
  TORCH_CHECK({{groups}} > 0 || g.M != 1, "{{name}}: batch_norm in training mode needs more than 1 value per channel, got input sizes ",
              ks_str(in_0.sizes()));
  {{running_checks}}
  // The spatial dims must collapse into one stride (contiguous or channels-last do; dims of size 1
  // carry any stride and are skipped); else a contiguous copy.
  auto spatial_stride = [&](const at::Tensor& t, int64_t& stride) {
    stride = 1;
    int64_t expect = -1;
    for (int64_t k = rank - 1; k >= 2; --k) {
      if (t.size(k) == 1) continue;
      if (expect < 0) stride = expect = t.stride(k);
      else if (t.stride(k) != expect) return false;
      expect *= t.size(k);
    }
    return true;
  };
  at::Tensor x = in_0;
  if (!spatial_stride(x, g.sS)) {
    x = in_0.contiguous();
    spatial_stride(x, g.sS);
  }
  g.sN = x.stride(0);
  g.sC = x.stride(1);
  if (g.S == 1) g.sS = g.sN;  // one value a sample: e = n
  int rows = g.C > 1 && g.sC == 1 ? 1 : 0;  // [N, C] or channels-last: threads along C
{{group_geometry}}
  const int flat = rows && g.sN == g.S * g.sS ? 1 : 0;  // value e at e * sS (no division)
  const c10::cuda::CUDAGuard guard(device);
  // An empty batch or no channels: nothing to compute or update (and no partition to size: the
  // divisions below by the channel blocks and the part length would trap on the host).
  const int64_t outs = g.G ? g.N * g.G : g.C;  // statistics: per channel or (n, group)
  if (g.M == 0 || g.C == 0) return at::zeros({2, outs}, in_0.options().dtype(at::kFloat));
  const int64_t channel_blocks = rows ? ks_cdiv(g.C, 32) : g.C;
  const int64_t min_part = rows ? 8 * 16 : 256 * 8;  // >= 16 values per thread
  // NCHW with each plane's values dense and 16-byte aligned: 16-byte loads (parts of whole float4s)
  const int v4 = {{v4}} && !rows && g.sS == 1 && g.S % 4 == 0 && g.sN % 4 == 0 && g.sC % 4 == 0 &&
                 reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 ? 1 : 0;
  // Whole waves: the largest part count whose blocks all run at once (at least one a channel block).
  const int64_t resident = (int64_t)ks_sm_count() * {{name}}_per_sm(rows, flat, v4);
  int64_t parts = resident / channel_blocks;
  if (parts > ks_cdiv(g.M, min_part)) parts = ks_cdiv(g.M, min_part);
  if (parts > 4096) parts = 4096;  // the finalize's warps of a channel merge them all
  if (parts < 1) parts = 1;
  if (g.G) {  // whole samples: pps parts each, none crossing into the next
    g.pps = ks_cdiv(parts, g.N);
    if (g.pps > ks_cdiv(g.S, min_part)) g.pps = ks_cdiv(g.S, min_part);
    if (g.pps < 1) g.pps = 1;
    g.per_part = ks_cdiv(g.S, g.pps);
    g.pps = ks_cdiv(g.S, g.per_part);
    g.parts = g.N * g.pps;
    // N * pps <= parts + N <= 4096 + N (pps = 1 past 4096 samples): the grid's y holds it
  } else {
    g.per_part = ks_cdiv(g.M, parts);
    if (v4) g.per_part = ks_cdiv(g.per_part, 4) * 4;  // M % 4 == 0 (S % 4 == 0): every part whole float4s
    g.parts = ks_cdiv(g.M, g.per_part);
  }
  at::Tensor stats = at::empty({2, outs}, in_0.options().dtype(at::kFloat));
  at::Tensor ws = at::empty({g.C * g.parts * 3}, in_0.options().dtype(at::kFloat));
  KsOperand descs[{{n}}];
  const c10::IntArrayRef xs = in_0.sizes();
  ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  const void* ins[{{n}}] = {x.data_ptr(){{in_ptrs}}};
  {{name}}_launch(ins, descs, ws.data_ptr<float>(), stats.data_ptr<float>(), {{running_ptrs}}, g, rows, flat, v4, {{eps}}, {{momentum}},
      c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return stats;
}
