
{{launcher_sig}} {
  // Tiles along C once a row has that many channels: whole rows are read.
  const bool along_c = C >= 32 * {{tiles}};
  const dim3 grid_c((unsigned)ks_cdiv(S, 32), (unsigned)ks_cdiv(C, 32 * {{tiles}}), (unsigned)N);
  const dim3 grid_s((unsigned)ks_cdiv(S, 32 * {{tiles}}), (unsigned)ks_cdiv(C, 32), (unsigned)N);
  switch (tiled) {
{{cases}}
    default: break;
  }
}
