#include "../ks_prelude.cuh"

// ---- batch_norm statistics of a concatenation {{name}} ----
// A thread per channel of the concatenation: its part's mean and rstd copied as they are (the
// statistics of a channel are its tensor's, whatever it is concatenated with), the running
// statistics updated in place as batch_stats/kernel.cu's finalize does.  The biased variance
// comes back from rstd = 1 / sqrt(var + eps), negative rounding clamped at 0 (1 / rstd^2 - eps loses precision only
// where var is far below eps; that error stays below eps's).
__global__ void __launch_bounds__(256) {{name}}_merge(const __grid_constant__ KsBnMergeParts parts,
                                                      float* __restrict__ stats, float* __restrict__ running_mean,
                                                      float* __restrict__ running_var, const int64_t C,
                                                      const float eps, const float momentum, const float unbias) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  int j = 0;
  while (j + 1 < parts.count && c >= parts.first[j + 1]) ++j;
  const int64_t width = parts.first[j + 1] - parts.first[j], k = c - parts.first[j];
  const float mean = parts.part[j][k], rstd = parts.part[j][width + k];
  stats[c] = mean;
  stats[C + c] = rstd;
  if (running_mean) running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * mean;
  if (running_var) {
    const float v = 1.f / (rstd * rstd) - eps;
    const float var = v < 0.f ? 0.f : v;  // not fmaxf: a NaN variance stays NaN, as torch's does
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * var * unbias;
  }
}

{{launcher_sig}} {
  if (C <= 0) return;
  {{name}}_merge<<<(unsigned)ks_cdiv(C, 256), 256, 0, stream>>>(parts, stats, running_mean, running_var, C, eps,
                                                                momentum, unbias);
}
