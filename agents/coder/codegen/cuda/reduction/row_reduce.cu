
    float r = {{op}}::identity();
#pragma unroll
    for (int j = 0; j < MAXV; ++j) if ({{valid}}) {
#pragma unroll
      for (int q = 0; q < VEC; ++q) r = {{op}}::apply(r, v[j][q]);
    }
    r = ks_row_allreduce<{{op}}, WARP>(r, smem, lanes);
    if (tx == 0 && row_ok) {
      const float acc = {{fin}};
      {{store}}
    }
