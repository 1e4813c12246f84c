
    float m = -KS_INF;
    {{each_max}}
    m = {{max}};
    const float ms = m == -KS_INF ? 0.f : m;  // all -inf: sum is 0, no inf - inf
    float s = 0.f;
    {{each_exp}}
    s = {{sum}};
{{logs}}
