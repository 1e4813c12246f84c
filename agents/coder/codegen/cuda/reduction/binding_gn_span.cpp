  if (gn_nhwc) {  // the channels-last input's kernels (gn_nhwc.cu), whatever the plan was
    plan.path = KS_PATH_TILE;
    plan.span = gn_span;
    plan.nhwc_channels = channels;
    plan.nhwc_out = {{keep}} && (nd == 4 || nd == 5);  // the program keeps the output NHWC
    plan.workspace_floats = ks_gn_nhwc_split(outer, x_sizes[0], gn_span, sms).workspace_floats;
  }
  // Long group_norm rows: the channel-span kernels (gn_span.cu) instead of the generic tile path,
  // 16 bytes at a time when every span starts on a 16-byte boundary and the operands allow it.
  else if (plan.path == KS_PATH_TILE && gn_span >= KS_GN_MIN_SPAN) {
    plan.span = gn_span;
    plan.workspace_floats = ks_gn_split(outer, R / gn_span, sms).workspace_floats;
    if (gn_span % {{vec}} == 0) vec = ks_describe_all({{{ptrs}}}, {{{shapes}}}, {{vec}}, descs);
  }
