  if (plan.path == KS_PATH_TILE && plan.nhwc_channels > 0) {  // a channels-last input (softmax_nhwc.cu)
    const int64_t C = plan.nhwc_channels, S = plan.span, N = outer;
    const int P = ks_softmax_nhwc_positions(C);
    const size_t smem = ks_softmax_nhwc_smem(C, {{nepi}});
    {{name}}_softmax_nhwc<<<dim3((unsigned)ks_cdiv(S, P), (unsigned)N), 256, smem, stream>>>({{args}}, o, C, S, P);
    return;
  }
