#include "../ks_prelude.cuh"

// ---- triangle kernel {{name}}: {{kind}} (diagonal {{diagonal}}) ----
{{value_fn}}


// Matrices [.., R, C] in one flat range: a thread per 4 consecutive outputs (loads in flight
// together); out = value where col - row {{keep}} diagonal, else 0 (not value * 0: a NaN or
// infinity outside the triangle is still a zero, as in torch).  Outside elements are not read.
__global__ void __launch_bounds__(256) {{name}}_kernel({{params}}, {{out_t}}* __restrict__ out,
                                                        const int64_t n, const int64_t R, const int64_t C) {
  const int64_t first = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (first >= n) return;
  const int64_t q = first / C;  // one division a thread; the next 3 step along the row
  int64_t col = first - q * C, row = q % R;
  float v[4];
  bool keep[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    keep[j] = first + j < n && col - row {{keep}} (int64_t)({{diagonal}});
    v[j] = keep[j] ? {{name}}_value({{args}}, first + j) : 0.0f;
    if (++col == C) { col = 0; row = row + 1 == R ? 0 : row + 1; }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (first + j < n) out[first + j] = ks_from_float<{{out_t}}>(keep[j] ? v[j] : 0.0f);
}

{{launcher_sig}} {
  if (n <= 0 || R <= 0 || C <= 0) return;
  {{name}}_kernel<<<(unsigned)ks_cdiv(ks_cdiv(n, 4), 256), 256, 0, stream>>>({{launch_args}}, static_cast<{{out_t}}*>(out), n, R, C);
}
