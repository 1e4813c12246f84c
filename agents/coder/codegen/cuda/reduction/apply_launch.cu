
  if (inner == 1 && plan.apply_affine) {
    static const int per_sm = ks_blocks_per_sm({{name}}_apply_rows, 256);
    const int64_t blocks = ks_grid(per_sm, outer * ks_cdiv(R, 2048));
    {{name}}_apply_rows<<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, stats, outer, R);
  } else {
    static const int per_sm = ks_blocks_per_sm({{name}}_apply, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer * R * inner, 256));
    {{name}}_apply<<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, stats, outer, R, inner);
  }
