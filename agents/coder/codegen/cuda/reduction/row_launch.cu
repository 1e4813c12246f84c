  if (plan.path == {{path}} && vec == {{v}}{{test}}) {
    auto kernel = {{name}}_row<{{v}}, {{maxv}}, {{warp}}, {{minb}}, {{maxt}}>;
    static int per_sm_by_warps[17] = {0};  // per block size: the block path's varies with R
    int& per_sm = per_sm_by_warps[{{threads}} / 32];
    if (per_sm == 0) per_sm = ks_blocks_per_sm(kernel, {{threads}});
    const dim3 block({{bx}}, {{by}});
    const int64_t blocks = ks_grid(per_sm, ks_cdiv(outer, {{rows_per_block}}));
    kernel<<<(unsigned)blocks, block, 0, stream>>>({{args}}, o, outer, R, {{lanes}});
    return;
  }
