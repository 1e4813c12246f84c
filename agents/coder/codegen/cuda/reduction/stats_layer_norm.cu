
    float s = 0.f;
    {{each_sum}}
    const float mean = ks_div_norm({{sum}}, (float)R);
    float ss = 0.f;
    {{each_square}}
    const float rstd = rsqrtf(ks_div_norm({{square_sum}}, (float)R) + {{eps}});  // rsqrt, as PyTorch

