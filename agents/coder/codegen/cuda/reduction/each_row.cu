#pragma unroll
    for (int j = 0; j < MAXV; ++j) if ({{valid}}) {
#pragma unroll
      for (int q = 0; q < VEC; ++q) { {{body}} }
    }
