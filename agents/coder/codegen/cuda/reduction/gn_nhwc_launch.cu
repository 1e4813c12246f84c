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
    // 16 or 8 channels: a warp's lanes over 2 or 4 positions (gn_nhwc.cu's P)
    const int lanes_p = C == 16 ? 2 : C == 8 ? 4 : 1;
    const dim3 grid((unsigned)ks_cdiv(S, 128 * lanes_p), (unsigned)ks_cdiv(C, 32), (unsigned)N);
#define KS_GN_NHWC_APPLY(KEEP, P) {{name}}_gn_nhwc_apply<4, KEEP, P><<<grid, 256, 0, stream>>>({{args}}, o, stats, C, S, cg)
    {{keep_launch}}if (lanes_p == 2) KS_GN_NHWC_APPLY(false, 2);
    else if (lanes_p == 4) KS_GN_NHWC_APPLY(false, 4);
    else KS_GN_NHWC_APPLY(false, 1);
#undef KS_GN_NHWC_APPLY
    return;
  }
