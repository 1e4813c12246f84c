
// ---- binding {{name}}: {{kind}} pooling over {{nd}} spatial dim(s) ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  const int64_t nd = {{nd}}, rank = in_0.dim();
  TORCH_CHECK(rank == nd + 1 || rank == nd + 2, "{{name}}: expected a ", ks_str(nd + 1), "-d or ",
              ks_str(nd + 2), "-d input, got sizes ", ks_str(in_0.sizes()));
  const int64_t batched = rank == nd + 2 ? 1 : 0;
  const int64_t kernel[] = {{{kernel}}}, stride[] = {{{stride}}}, padding[] = {{{padding}}},
                dilation[] = {{{dilation}}}, output_size[] = {{{output_size}}};
  (void)kernel; (void)stride; (void)padding; (void)dilation; (void)output_size;
  KsPoolGeom g{};
  g.N = batched ? in_0.size(0) : 1;
  g.C = in_0.size(batched);
  g.xs[0] = batched ? in_0.stride(0) : 0;
  g.xs[1] = in_0.stride(batched);
  std::vector<int64_t> out_shape(in_0.sizes().begin(), in_0.sizes().begin() + batched + 1);
  for (int64_t k = 0; k < 3; ++k) {
    const int64_t j = k - (3 - nd);  // index into the spatial dims (negative: a padding dim)
    if (j < 0) {
      g.in[k] = g.out[k] = g.k[k] = g.s[k] = g.dil[k] = 1;
      g.p[k] = 0;
      g.xs[2 + k] = 0;
      continue;
    }
    const int64_t in = in_0.size(batched + 1 + j);
    TORCH_CHECK(in >= 1, "{{name}}: expected non-empty spatial dims (as torch's pooling), got sizes ",
                ks_str(in_0.sizes()));  // the kernels clamp taps to in - 1
    g.in[k] = in;
    g.xs[2 + k] = in_0.stride(batched + 1 + j);
{{geometry}}
    TORCH_CHECK(g.out[k] >= 1, "{{name}}: pooling output size ", ks_str(g.out[k]), " < 1 for input sizes ",
                ks_str(in_0.sizes()));
    out_shape.push_back(g.out[k]);
  }
  g.divisor = {{divisor}};
  g.count_include_pad = {{count_include_pad}};
  // A channels-last input (a cuDNN NHWC conv's output) is walked in its memory order, so a warp
  // reads one position's consecutive channels; the output is contiguous, or channels-last too
  // where the coder keeps it so (its readers take NHWC: agents/coder/layout.py).
  const auto cl_format = rank == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
  const bool cl = batched && (rank == 4 || rank == 5) && g.C > 1 && !in_0.is_contiguous() &&
                  in_0.is_contiguous(cl_format);
  const c10::cuda::CUDAGuard guard(device);
  g.keep_cl = cl && {{keep}};
  at::Tensor out = at::empty(out_shape, g.keep_cl ? in_0.options().dtype({{out_dtype}}).memory_format(cl_format)
                                                  : in_0.options().dtype({{out_dtype}}));
  if (out.numel() == 0) return out;
  const int64_t per_sample = out.numel() / g.N;
  TORCH_CHECK(per_sample < (1LL << 31) - (int64_t)ks_sm_count() * 2048 * 2, "{{name}}: ", ks_str(per_sample),
              " outputs per sample (the kernel indexes a sample's outputs with 32 bits)");
  KsOperand descs[{{n}}];
  const c10::IntArrayRef xs = in_0.sizes(), os(out_shape);
  (void)xs; (void)os;
  ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  const void* ins[{{n}}] = {{{in_ptrs}}};
  // the 4-channel fast path (kernel.cu's cl4 kernel): float32 NHWC, 16-byte aligned positions
  const auto aligned = [](int64_t v) { return v % 4 == 0; };
  const bool cl4 = {{vec4}} && cl && g.C % 4 == 0 && g.xs[1] == 1 && aligned(g.xs[0]) && aligned(g.xs[2]) &&
                   aligned(g.xs[3]) && aligned(g.xs[4]) && reinterpret_cast<uintptr_t>(in_0.data_ptr()) % 16 == 0;
  // the contiguous-input plane kernel: a fixed 1-D / 2-D window (the coder's), W dense, 32-bit
  // sizes, planes of at least 512 outputs (a block works on one plane at a time); 16-byte loads
  // where every row starts 16-byte aligned and the padding keeps each span's first load on a
  // multiple of 4 (plane_vl: pool.py's emit_pool decides from the padding)
  const bool plane_ok = {{plane_kernel}} && !cl && g.in[0] == 1 && g.xs[4] == 1 && g.in[1] * g.in[2] < (1LL << 31) &&
                        g.out[1] * g.out[2] >= 512;
  const bool vl = plane_ok && {{plane_vl}} && g.in[2] % 4 == 0 && aligned(g.xs[0]) && aligned(g.xs[1]) &&
                  aligned(g.xs[3]) && reinterpret_cast<uintptr_t>(in_0.data_ptr()) % 16 == 0;
  // the row form of the 4-channel kernels (a fixed 2-D window, pool.py's _row_window): a sample's
  // input offsets in 32 bits
  const bool row_ok = {{row_kernel}} && cl4 && g.in[0] == 1 &&
                      (g.in[1] - 1) * g.xs[3] + (g.in[2] - 1) * g.xs[4] + g.C < (1LL << 31);
  {{name}}_launch(ins, descs, out.data_ptr(), g, cl4 ? 2 : cl ? 1 : 0, per_sample, plane_ok ? 1 : 0, vl ? 1 : 0,
      row_ok ? 1 : 0, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
