  if (plan.path == KS_PATH_COLREG) {
    static const int per_sm = ks_blocks_per_sm({{name}}_colreg<KS_COLREG_MAX_R>, 256);
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer * inner, 256));
    {{name}}_colreg<KS_COLREG_MAX_R><<<(unsigned)blocks, 256, 0, stream>>>({{args}}, o, outer, R, inner);
    return;
  }
