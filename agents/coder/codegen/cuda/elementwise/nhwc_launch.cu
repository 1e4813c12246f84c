
{{launcher_sig}} {
  const dim3 grid((unsigned)ks_cdiv(S, 32 * {{tiles}}), (unsigned)ks_cdiv(C, 32), (unsigned)N);
  // fewer than 32 channels: the narrow kernel, one contiguous run of positions x channels a block
  const bool narrow = {{narrow}};
  const dim3 grid_narrow((unsigned)ks_cdiv(S, 32 * {{tiles}}), (unsigned)N);
  (void)narrow; (void)grid_narrow;
  switch (tiled) {
{{cases}}
    default: break;
  }
}
