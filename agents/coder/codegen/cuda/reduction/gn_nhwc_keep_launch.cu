if (plan.nhwc_out) {{name}}_gn_nhwc_apply<4, true><<<grid, 256, 0, stream>>>({{args}}, o, stats, C, S, cg);
    else 