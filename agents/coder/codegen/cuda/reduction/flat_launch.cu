  if (plan.path == KS_PATH_FLAT) {  // long rows (flat.cu); partials in the workspace when split
    const unsigned blocks = (unsigned)(outer * plan.splits);
{{flat_calls}}
    if (plan.splits > 1) {{name}}_flat_finalize<<<(unsigned)outer, 256, 0, stream>>>({{args}}, o, workspace, outer, plan.splits, R);
    return;
  }
