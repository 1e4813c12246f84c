
{{launcher_sig}} {
  const dim3 grid((unsigned)ks_cdiv(S, 32 * {{tiles}}), (unsigned)ks_cdiv(C, 32), (unsigned)N);
  switch (tiled) {
{{cases}}
    default: break;
  }
}
