  if (plan.path == KS_PATH_COLLOOP) {
    static const int per_sm = ks_blocks_per_sm({{name}}_colloop, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer * inner, 256));
    {{name}}_colloop<<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, outer, R, inner);
    return;
  }
