
    if (tx == 0 && row_ok) {
      const float acc = ms + logf(s);
      {{store}}
    }
