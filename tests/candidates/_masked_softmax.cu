// Row softmax over the last dimension with a keep-mask (True = keep), three ways, for the
// Verifier's stress-case tests (tests/test_stress_cases_gpu.py).  One thread per row: these
// kernels are judged, not timed.
//   mode 0 (honest):   subtract the row's maximum; a row with no kept entry is NaN, as
//                      PyTorch's softmax of a row of -inf is
//   mode 1 (naive):    exp(x) / sum(exp(x)) without the maximum: right on N(0, 1) inputs,
//                      overflows on large logits
//   mode 2 (sentinel): masked entries as -1e30 instead of -inf: right while every row keeps an
//                      entry, uniform weights instead of NaN on a fully masked row
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cmath>

__global__ void masked_softmax_rows(const float* x, const bool* keep, float* out, long long rows,
                                    long long cols, int mode) {
    long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * cols;
    const bool* kr = keep + r * cols;
    float* yr = out + r * cols;
    const float masked = mode == 2 ? -1e30f : -INFINITY;
    float m = mode == 1 ? 0.0f : -INFINITY;
    if (mode != 1)
        for (long long c = 0; c < cols; ++c) m = fmaxf(m, kr[c] ? xr[c] : masked);
    if (m == -INFINITY) {
        for (long long c = 0; c < cols; ++c) yr[c] = NAN;
        return;
    }
    float s = 0.0f;
    for (long long c = 0; c < cols; ++c) s += expf((kr[c] ? xr[c] : masked) - m);
    for (long long c = 0; c < cols; ++c) yr[c] = expf((kr[c] ? xr[c] : masked) - m) / s;
}

torch::Tensor masked_softmax(torch::Tensor x, torch::Tensor keep, int64_t mode) {
    TORCH_CHECK(x.is_cuda() && keep.is_cuda(), "CUDA tensors only");
    TORCH_CHECK(x.scalar_type() == torch::kFloat && keep.scalar_type() == torch::kBool,
                "float32 values and a bool mask");
    TORCH_CHECK(x.sizes() == keep.sizes(), "the mask must have the values' shape");
    auto xc = x.contiguous();
    auto kc = keep.contiguous();
    auto out = torch::empty_like(xc);
    const long long cols = xc.size(-1);
    const long long rows = cols ? xc.numel() / cols : 0;
    if (rows == 0) return out;
    masked_softmax_rows<<<(unsigned)((rows + 127) / 128), 128, 0,
                          at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), kc.data_ptr<bool>(), out.data_ptr<float>(), rows, cols, (int)mode);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("masked_softmax", &masked_softmax, "row softmax with a keep-mask (mode: see the top)");
}
