    {{stats}}
    for (int64_t r0 = 0; r0 < R; r0 += 8) {  // the second read: 8 loads in flight, then 8 stores
      float x[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (r0 + u < R) {
          const int64_t rr = r0 + u, idx = base + rr * inner;
          (void)idx; (void)rr;
          {{loads1}}
          const int q = 0; {{pro_x}}
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (r0 + u < R) {
          const int64_t rr = r0 + u, idx = base + rr * inner;
          (void)idx; (void)rr;
          const int q = 0; (void)q;
          float y = {{y}};
          {{e_loads}} {{epi}}
          out[idx] = ks_from_float<{{out_t}}>(y);
        }
      }
    }
