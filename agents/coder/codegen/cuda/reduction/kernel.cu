
#include "../ks_prelude.cuh"

// ---- reduction kernel {{name}}: {{kind}} ----
{{pro}}
{{epi}}
{{row_kernel}}
{{cols_kernel}}
{{colloop_kernel}}
{{flat_kernel}}
{{tile_kernel}}
{{apply_kernel}}
{{launcher_sig}} {
  {{out_t}}* o = static_cast<{{out_t}}*>(out);
  if (outer <= 0 || inner <= 0) return;
{{row_launch}}
{{colloop_launch}}
{{flat_launch}}
{{cols_launch}}
{{tile_launch}}
}

