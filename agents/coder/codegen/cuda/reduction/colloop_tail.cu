    for (; r < R; ++r) {
      const int64_t rr = r, idx = base + rr * inner;
      (void)idx; (void)rr;
      float x[1]; const int u = 0;
      {{loads1}}
      const int q = 0; {{pro_x}}
      st.push(x[0]);
    }
