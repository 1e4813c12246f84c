
#pragma unroll
    for (int j = 0; j < MAXV; ++j) if ({{valid}}) {
      const int col = (j * TX + tx) * VEC;
      {{w_loads}}
      {{e_loads}}
      float yv[VEC];
#pragma unroll
      for (int q = 0; q < VEC; ++q) { yv[q] = {{y}}; {{w_upd}} {{epi}} }
      ks_st_vec<VEC>(out + row * R + col, yv);
    }
