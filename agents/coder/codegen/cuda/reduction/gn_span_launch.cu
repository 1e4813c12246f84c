  if (plan.path == KS_PATH_TILE && plan.span > 0) {  // group_norm by channel spans (gn_span.cu)
    const int64_t cg = R / plan.span;
    const KsGnSplit split = ks_gn_split(outer, cg, ks_sm_count());
    float* partials = workspace;
    float* stats = workspace + split.stats_offset;
    auto gn_stats = vec == {{vec}} ? {{name}}_gn_stats<{{vec}}> : {{name}}_gn_stats<1>;
    auto gn_apply = vec == {{vec}} ? {{name}}_gn_apply<{{vec}}> : {{name}}_gn_apply<1>;
    gn_stats<<<dim3((unsigned)outer, (unsigned)split.splits), 256, 0, stream>>>(
        {{args}}, partials, outer, cg, plan.span, split.per_block);
    static const int fin_per_sm = ks_blocks_per_sm({{name}}_finalize, 256);
    {{name}}_finalize<<<(unsigned)ks_grid(fin_per_sm, ks_cdiv(outer, 256)), 256, 0, stream>>>(
        {{args}}, o, partials, stats, outer, split.splits, R);
    static int per_sm_by_vec[2] = {0, 0};
    int& per_sm = per_sm_by_vec[vec == {{vec}}];
    if (per_sm == 0) per_sm = ks_blocks_per_sm(gn_apply, 256);
    gn_apply<<<(unsigned)ks_grid(per_sm, outer * cg), 256, 0, stream>>>(
        {{args}}, o, stats, outer * cg, cg, plan.span);
    return;
  }
