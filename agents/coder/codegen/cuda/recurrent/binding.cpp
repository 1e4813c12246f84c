
// ---- binding {{name}}: {{what}} ----
// torch's aten.{{op}}.input for this module: (input, hx, params) with the module's layers,
// directions, batch_first and biases compiled in.  Layers go to launches of the persistent kernel:
// a unidirectional stack as many layers a launch as the GPU holds at once (a wavefront), a
// bidirectional one a layer a launch (its next layer needs the reverse direction's whole pass).
{{ret_type}} {{name}}(at::Tensor input, std::vector<at::Tensor> hx, std::vector<at::Tensor> params) {
  constexpr int64_t LAYERS = {{layers}}, DIRS = {{dirs}}, PER = {{per_chain}}, GATES = {{gates}};
  constexpr bool BATCH_FIRST = {{batch_first}}, LSTM = {{lstm}};
  TORCH_CHECK(input.is_cuda(), "{{name}}: expected a CUDA input, got ", input.device());
  TORCH_CHECK(input.scalar_type() == at::kFloat, "{{name}}: the recurrent kernel runs float32, got ",
              input.scalar_type());
  TORCH_CHECK(input.dim() == 3, "{{name}}: expected a batched 3-dim input, got ", ks_str(input.sizes()));
  const at::Device device = input.device();
  const c10::cuda::CUDAGuard guard(device);
  TORCH_CHECK((int64_t)hx.size() == (LSTM ? 2 : 1), "{{name}}: expected ", LSTM ? "(h0, c0)" : "h0");
  TORCH_CHECK((int64_t)params.size() == LAYERS * DIRS * PER, "{{name}}: expected ", ks_str(LAYERS * DIRS * PER),
              " weight tensors, got ", ks_str((int64_t)params.size()));
  at::Tensor x = input.contiguous();
  const int64_t T = BATCH_FIRST ? x.size(1) : x.size(0), B = BATCH_FIRST ? x.size(0) : x.size(1), I = x.size(2);
  ks_check_tensor(hx[0], "{{name}} h0", at::kFloat, device);
  at::Tensor h0 = hx[0].contiguous();
  TORCH_CHECK(h0.dim() == 3 && h0.size(0) == LAYERS * DIRS && h0.size(1) == B,
              "{{name}}: h0 of shape ", ks_str(h0.sizes()), " for ", ks_str(LAYERS * DIRS), " chains and batch ",
              ks_str(B));
  const int64_t H = h0.size(2);
  at::Tensor c0;
  if (LSTM) {
    ks_check_tensor(hx[1], "{{name}} c0", at::kFloat, device);
    c0 = hx[1].contiguous();
    TORCH_CHECK(c0.sizes() == h0.sizes(), "{{name}}: c0 of shape ", ks_str(c0.sizes()), ", h0 ", ks_str(h0.sizes()));
  }
  TORCH_CHECK(T > 0 && B > 0 && H > 0, "{{name}}: empty sequence, batch or hidden state (", ks_str(x.sizes()), ")");
  TORCH_CHECK(T < 0x7fffffff / 4096 && B <= {{max_batch}} && H <= 0x7fff && I <= 0x7fff,
              "{{name}}: sizes outside the recurrent kernel's range: input ", ks_str(x.sizes()), ", hidden ", ks_str(H));
  std::vector<at::Tensor> w(params.size());
  for (int64_t l = 0; l < LAYERS; ++l) {
    for (int64_t d = 0; d < DIRS; ++d) {
      const int64_t k = (l * DIRS + d) * PER, in = l == 0 ? I : DIRS * H;
      for (int64_t p = 0; p < PER; ++p) {
        ks_check_tensor(params[k + p], "{{name}} weight", at::kFloat, device);
        w[k + p] = params[k + p].contiguous();
      }
      TORCH_CHECK(w[k].dim() == 2 && w[k].size(0) == GATES * H && w[k].size(1) == in && w[k + 1].dim() == 2 &&
                  w[k + 1].size(0) == GATES * H && w[k + 1].size(1) == H,
                  "{{name}}: layer ", ks_str(l), " weights ", ks_str(w[k].sizes()), ", ", ks_str(w[k + 1].sizes()),
                  " for input size ", ks_str(in), " and hidden size ", ks_str(H));
      if (PER == 4)
        TORCH_CHECK(w[k + 2].numel() == GATES * H && w[k + 3].numel() == GATES * H, "{{name}}: layer ",
                    ks_str(l), " biases of ", ks_str(w[k + 2].numel()), " and ", ks_str(w[k + 3].numel()), " values");
    }
  }
  const auto opts = x.options();
  at::Tensor y = BATCH_FIRST ? at::empty({B, T, DIRS * H}, opts) : at::empty({T, B, DIRS * H}, opts);
  at::Tensor hn = at::empty({LAYERS * DIRS, B, H}, opts);
  at::Tensor cn = LSTM ? at::empty({LAYERS * DIRS, B, H}, opts) : at::Tensor();
  // every layer but the last writes its whole output [T, B, DIRS * H] for the next one
  at::Tensor ws = LAYERS > 1 ? at::empty({LAYERS - 1, T, B, DIRS * H}, opts) : at::Tensor();
  at::Tensor counters = at::empty({{{max_chains}}}, opts.dtype(at::kInt));
  auto out_of = [&](int64_t l) -> float* {
    return l == LAYERS - 1 ? y.data_ptr<float>() : ws.data_ptr<float>() + l * T * B * DIRS * H;
  };
  auto out_strides = [&](int64_t l) -> std::pair<int64_t, int64_t> {  // (time, batch) strides of layer l's output
    if (l == LAYERS - 1 && BATCH_FIRST) return {DIRS * H, T * DIRS * H};
    return {B * DIRS * H, DIRS * H};
  };
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device.index());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
  const int64_t max_units = {{name}}_max_units();
  for (int64_t l0 = 0; l0 < LAYERS;) {
    // the most layers (from l0) a launch holds: units a block grow until the blocks are resident
    int64_t l1 = 0, U = 0, in_max = 0;
    for (int64_t top = DIRS == 1 ? LAYERS : l0 + 1; top > l0 && U == 0; --top) {
      const int64_t chains = (top - l0) * DIRS;
      if (chains > {{max_chains}}) continue;
      const int64_t widest = std::max(l0 == 0 ? I : DIRS * H, top - 1 > l0 || l0 > 0 ? DIRS * H : 0);
      for (int64_t u = std::max<int64_t>(1, (chains * H + sms - 1) / sms); u <= max_units; ++u) {
        const int per_sm = {{name}}_blocks_per_sm({{name}}_smem_bytes((int)u, (int)widest, (int)H, (int)B));
        if (per_sm == 0) break;  // shared memory grows with u
        if (chains * ((H + u - 1) / u) <= (int64_t)per_sm * sms) {
          l1 = top, U = u, in_max = widest;
          break;
        }
      }
    }
    TORCH_CHECK(U > 0, "{{name}}: layer ", ks_str(l0), " (hidden size ", ks_str(H), ", input ",
                ks_str(l0 == 0 ? I : DIRS * H), ", batch ", ks_str(B), ") does not fit the persistent recurrent kernel "
                "on this GPU (", ks_str(sms), " SMs): the plan variant without it (cuDNN's call) runs this size");
    {{name}}_chains chains{};
    const int64_t per_chain = (H + U - 1) / U;
    for (int64_t l = l0; l < l1; ++l) {
      const auto [xs_t, xs_b] = l == 0 ? std::pair<int64_t, int64_t>{BATCH_FIRST ? I : B * I, BATCH_FIRST ? T * I : I}
                                       : out_strides(l - 1);
      const auto [ys_t, ys_b] = out_strides(l);
      for (int64_t d = 0; d < DIRS; ++d) {
        const int64_t k = (l - l0) * DIRS + d, p = (l * DIRS + d) * PER;
        {{name}}_chain& ch = chains.chain[k];
        ch.x = l == 0 ? x.data_ptr<float>() : out_of(l - 1);
        ch.xs_t = xs_t, ch.xs_b = xs_b, ch.in = (int)(l == 0 ? I : DIRS * H);
        ch.w_ih = w[p].data_ptr<float>(), ch.w_hh = w[p + 1].data_ptr<float>();
        ch.b_ih = PER == 4 ? w[p + 2].data_ptr<float>() : nullptr;
        ch.b_hh = PER == 4 ? w[p + 3].data_ptr<float>() : nullptr;
        ch.h0 = h0.data_ptr<float>() + (l * DIRS + d) * B * H;
        ch.c0 = LSTM ? c0.data_ptr<float>() + (l * DIRS + d) * B * H : nullptr;
        ch.y = out_of(l) + d * H, ch.ys_t = ys_t, ch.ys_b = ys_b;
        ch.hn = hn.data_ptr<float>() + (l * DIRS + d) * B * H;
        ch.cn = LSTM ? cn.data_ptr<float>() + (l * DIRS + d) * B * H : nullptr;
        ch.reverse = (int)d, ch.first_block = (int)(k * per_chain), ch.blocks = (int)per_chain;
        ch.dep[0] = l > l0 ? (int)((l - 1 - l0) * DIRS) : -1;
        ch.dep[1] = l > l0 && DIRS == 2 ? (int)((l - 1 - l0) * DIRS + 1) : -1;
      }
    }
    chains.count = (int)((l1 - l0) * DIRS);
    const int err = {{name}}_launch(chains, (int)(chains.count * per_chain), (int)B, (int)T, (int)H, (int)U,
                                    (int)in_max, reinterpret_cast<unsigned*>(counters.data_ptr<int>()), stream);
    TORCH_CHECK(err == 0, "{{name}}: the recurrent kernel's cooperative launch failed: ",
                cudaGetErrorString((cudaError_t)err));
    l0 = l1;
  }
  return {{ret_expr}};
}
