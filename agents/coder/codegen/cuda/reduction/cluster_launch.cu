  if (plan.path == KS_PATH_COLS && vec == {{vec}} && R <= {{max_rows}}LL &&
      ks_device_attr<cudaDevAttrComputeCapabilityMajor>(0) >= 9) {
    const int C = (int)ks_cdiv(R, {{rows_per_cta}});
    const int64_t ctas = outer * ks_cdiv(inner, {{width}}) * C;
    if (ctas <= 0x7fffffffLL) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)ctas);
      cfg.blockDim = dim3({{threads}});
      cfg.stream = stream;
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = (unsigned)C;
      attr[0].val.clusterDim.y = 1;
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      bool full = true;
      for (int k = 0; k < {{nin}}; ++k) full = full && descs[k].mode == KS_FULL;
      const cudaError_t launched = full
          ? cudaLaunchKernelEx(&cfg, {{name}}_cluster<{{vec}}, {{txv}}, {{tyr}}, {{rpt}}, {{full}}>, {{args}}, o, outer, R, inner)
          : cudaLaunchKernelEx(&cfg, {{name}}_cluster<{{vec}}, {{txv}}, {{tyr}}, {{rpt}}, false>, {{args}}, o, outer, R, inner);
      if (launched == cudaSuccess) return;
      (void)cudaGetLastError();  // not left pending: the column tiles below run instead
    }
  }
