    if (r < R) {
      const int left = (int)(R - r);  // 1 .. 7
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (u < left) {
          const int64_t rr = r + u, idx = base + rr * inner;
          (void)idx; (void)rr;
          {{loads1}}
          const int q = 0; {{pro_x}}
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
        if (u < left) st.push(x[u]);
    }
