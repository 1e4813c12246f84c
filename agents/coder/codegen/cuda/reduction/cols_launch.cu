  if (plan.path == KS_PATH_COLS) {
    const size_t smem = (size_t)R * plan.threads_x * sizeof(float);
    static bool opted_in[64] = {false};
    // refused: a tile that needed the opt-in fails its own launch, with that error
    ks_smem_opt_in({{name}}_cols, ks_smem_optin() - KS_COLS_STATIC_SMEM, opted_in);
    const int threads = plan.threads_x * plan.threads_y;
    const int per_sm = ks_blocks_per_sm({{name}}_cols, threads, smem);  // R sets it: not cached
    const int64_t blocks = ks_grid(per_sm, outer * ks_cdiv(inner, plan.threads_x));
    {{name}}_cols<<<(unsigned)blocks, dim3(plan.threads_x, plan.threads_y), smem, stream>>>({{args}}, o, outer, R, inner);
    return;
  }
