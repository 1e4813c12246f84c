
  {
    static const int per_sm = ks_blocks_per_sm({{name}}_apply, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer * R * inner, 256));
    {{name}}_apply<<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, stats, outer, R, inner);
  }
