
    if (tx == 0) {
      const float acc = ms + logf(s);
      {{store}}
    }
