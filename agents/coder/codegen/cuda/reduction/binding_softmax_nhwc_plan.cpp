  if (sm_nhwc) {  // [outer, R, inner] = [N, C, S]: softmax_nhwc.cu, whatever the plan was
    plan.path = KS_PATH_TILE;
    plan.span = inner;
    plan.nhwc_channels = R;
    plan.workspace_floats = 0;
  }
