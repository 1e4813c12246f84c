  // Tile path: partial states first (when R is split), then statistics last.
  const int64_t cols = outer * inner;
  float* partials = workspace;
  float* stats = workspace + (plan.splits > 1 ? plan.splits * cols * {{nf}} : 0);
  const dim3 block(plan.threads_x, plan.threads_y);
  const dim3 grid((unsigned)(outer * ks_cdiv(inner, plan.threads_x)), (unsigned)plan.splits);
  if (plan.col_affine)
    {{name}}_tile<true><<<grid, block, 0, stream>>>({{args}}, o, partials, stats, outer, R, inner, plan.r_per_split);
  else
    {{name}}_tile<false><<<grid, block, 0, stream>>>({{args}}, o, partials, stats, outer, R, inner, plan.r_per_split);
  if (plan.splits > 1) {
    static const int per_sm = ks_blocks_per_sm({{name}}_finalize, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(cols, 256));
    {{name}}_finalize<<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, partials, stats, cols, plan.splits, R);
  }{{apply_launch}}
