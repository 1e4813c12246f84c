  if (plan.path == KS_PATH_COLLOOP) {
    const int64_t blocks_needed = ks_cdiv(outer * inner, 256);
    if (plan.col_affine) {
      static const int per_sm = ks_blocks_per_sm({{name}}_colloop<true>, 256);
      {{name}}_colloop<true><<<(unsigned)ks_grid(per_sm, blocks_needed), 256, 0, stream>>>({{args}}, o, outer, R, inner);
    } else {
      static const int per_sm = ks_blocks_per_sm({{name}}_colloop<false>, 256);
      {{name}}_colloop<false><<<(unsigned)ks_grid(per_sm, blocks_needed), 256, 0, stream>>>({{args}}, o, outer, R, inner);
    }
    return;
  }
