
// ---- binding {{name}}: {{kind}} ----
at::Tensor {{name}}({{cparams}}) {
  TORCH_CHECK(in_0.is_cuda(), "{{name}}: expected CUDA tensors");
  const at::Device device = in_0.device();
  {{checks}}
  std::vector<int64_t> x_sizes(in_0.sizes().begin(), in_0.sizes().end());  // a view may permute it
  const int64_t nd = (int64_t)x_sizes.size();
  int64_t outer = 1, R = 1, inner = 1;
  std::vector<int64_t> out_shape;
{{view}}
  const c10::cuda::CUDAGuard guard(device);  // after validation: errors throw before it
  at::Tensor out = at::empty(out_shape, in_0.options().dtype({{out_dtype}}){{out_format}});
  if (out.numel() == 0) return out;
  TORCH_CHECK(R > 0, "{{name}}: reduction over an empty dimension");{{inner_check}}
  const bool normalizing = {{normalizing}};
  const bool rows32 = {{rows32}};
  const int sms = ks_sm_count(), smem_optin = ks_smem_optin();
  KsRedPlan plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, false);{{cols_replan}}
  const c10::IntArrayRef xs(x_sizes), os(out_shape);
  (void)os;
  KsOperand descs[{{n}}];
  auto row_path = [&]() { return plan.path == KS_PATH_ROW_WARP || plan.path == KS_PATH_ROW_BLOCK || plan.path == KS_PATH_ROW_SUB; };
  // 16-byte operands where the path reads them so: rows, flat chunks (R % vec) or the column kernels (inner).
  const int want = (((row_path() || plan.path == KS_PATH_FLAT) && R % {{vec}} == 0) ||
                    (plan.path == KS_PATH_COLS && inner % {{vec}} == 0)) ? {{vec}} : 1;
  int vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, want, descs);
  // Row kernels read only row-affine layouts (full rows, row vectors, per-row values; group_norm's
  // any layout but general strides): try the scalar width (rows of any length), else take the
  // tile path.
  const int row_read[] = {{{row_read}}};
  auto row_affine = [&]() {
    for (int k : row_read) if (!ks_row_affine(descs[k], R, {{row_any}})) return false;
    return true;
  };
  if (row_path() && vec > 1 && !row_affine()) vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  if (row_path() && !row_affine()) {
    plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, true);
    vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, 1, descs);
  }
  // The block path's scalar kernel caches KS_BLOCK_SCALAR_VALUES per thread, not 32: with 32
  // scalar loads in flight under the 512-thread register bound, ptxas spilled.  More threads
  // per row, or the tile path for rows longer than 512 x that.
  if (plan.path == KS_PATH_ROW_BLOCK && vec == 1) {
    const int64_t tx = ks_pow2_ceil(ks_cdiv(R, KS_BLOCK_SCALAR_VALUES));
    if (tx <= 512) plan.threads_x = (int)(tx > 32 ? tx : 32);
    else plan = ks_plan_reduction(outer, R, inner, sms, smem_optin, {{nf}}, normalizing, rows32, true);
  }
  // Per-column bases (an operand at its column's base plus r times a step): whether every operand
  // a kernel reads per value allows them.  The column loop and the apply kernel read the prologue's
  // and (normalising kinds) the epilogue's, the tile kernel the prologue's.
  const auto all_col_affine = [&](std::initializer_list<int> read) {
    for (int k : read) if (!ks_col_affine(descs[k], R, inner)) return 0;
    return 1;
  };
  if (plan.path == KS_PATH_COLLOOP) plan.col_affine = all_col_affine({{{col_read}}});
  if (plan.path == KS_PATH_TILE) {
    plan.col_affine = all_col_affine({{{tile_read}}});
    plan.apply_affine = normalizing && inner == 1 ? all_col_affine({{{col_read}}}) : 0;
  }
{{span_plan}}  at::Tensor workspace;
  float* ws = nullptr;
  if (plan.workspace_floats > 0) {
    workspace = at::empty({plan.workspace_floats}, in_0.options().dtype(at::kFloat));
    ws = workspace.data_ptr<float>();
  }
  const void* ins[{{n}}] = {{{in_ptrs}}};
  {{name}}_launch(ins, descs, out.data_ptr(), ws, outer, R, inner, plan, vec,
      c10::cuda::getCurrentCUDAStream(device.index()).stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();{{out_finish}}
  return out;
}

