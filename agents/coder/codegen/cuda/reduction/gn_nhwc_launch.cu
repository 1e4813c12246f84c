  if (plan.path == KS_PATH_TILE && plan.nhwc_channels > 0) {  // group_norm of an NHWC input (gn_nhwc.cu)
    const int64_t C = plan.nhwc_channels, S = plan.span, cg = R / S, N = outer / (C / cg);
    const KsGnSplit split = ks_gn_nhwc_split(outer, N, S, ks_sm_count());
    float* partials = workspace;
    float* stats = workspace + split.stats_offset;
    {{name}}_gn_nhwc_stats<<<dim3((unsigned)N, (unsigned)split.splits), 256, 0, stream>>>(
        {{args}}, partials, outer, C, S, cg, split.per_block);
    static const int fin_per_sm = ks_blocks_per_sm({{name}}_finalize, 256);
    {{name}}_finalize<<<(unsigned)ks_grid(fin_per_sm, ks_cdiv(outer, 256)), 256, 0, stream>>>(
        {{args}}, o, partials, stats, outer, split.splits, R);
    const dim3 grid((unsigned)ks_cdiv(S, 128), (unsigned)ks_cdiv(C, 32), (unsigned)N);
    {{keep_launch}}{{name}}_gn_nhwc_apply<4, false><<<grid, 256, 0, stream>>>({{args}}, o, stats, C, S, cg);
    return;
  }
