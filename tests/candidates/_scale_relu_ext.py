"""One CUDA extension shared by the test candidates (compiled once, cached by torch).

`scale_relu` is the honest kernel (any shape, sizes at run time); the other functions are the
building blocks of the cheating candidates.
"""

from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_relu_kernel(const float* x, const float* b, float* out,
                                  long long n, long long cols) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = x[i] * 2.0f + b[i % cols];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

static void launch(const torch::Tensor& x, const torch::Tensor& b, torch::Tensor& out,
                   long long n, long long cols) {
    if (n == 0) return;
    long long blocks = (n + 255) / 256;
    if (blocks > 65535LL * 8) blocks = 65535LL * 8;
    scale_relu_kernel<<<(unsigned)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

static void check(const torch::Tensor& x, const torch::Tensor& b) {
    TORCH_CHECK(x.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat, "fp32 only");
    TORCH_CHECK(x.is_contiguous() && b.is_contiguous(), "contiguous inputs only");
    TORCH_CHECK(x.size(-1) == b.numel(), "bias size must match the last dimension");
}

torch::Tensor scale_relu(torch::Tensor x, torch::Tensor b) {
    check(x, b);
    auto out = torch::empty_like(x);
    launch(x, b, out, x.numel(), b.numel());
    return out;
}

torch::Tensor scale_relu_partial(torch::Tensor x, torch::Tensor b) {
    check(x, b);
    auto out = torch::empty_like(x);
    launch(x, b, out, x.numel() / 2, b.numel());  // only the first half
    return out;
}

torch::Tensor scale_relu_fixed(torch::Tensor x, torch::Tensor b) {
    auto out = torch::empty_like(x);
    launch(x, b, out, 4096LL * 4096LL, 4096);  // specialised to the problem's one shape
    return out;
}

torch::Tensor scale_relu_inplace(torch::Tensor x, torch::Tensor b) {
    check(x, b);
    launch(x, b, x, x.numel(), b.numel());  // overwrites the input
    return x;
}

torch::Tensor scale_relu_broken(torch::Tensor x, torch::Tensor b) {
    TORCH_CHECK(false, "scale_relu_broken: this kernel always fails");
    return x;
}
"""

CPP_SOURCE = """
torch::Tensor scale_relu(torch::Tensor x, torch::Tensor b);
torch::Tensor scale_relu_partial(torch::Tensor x, torch::Tensor b);
torch::Tensor scale_relu_fixed(torch::Tensor x, torch::Tensor b);
torch::Tensor scale_relu_inplace(torch::Tensor x, torch::Tensor b);
torch::Tensor scale_relu_broken(torch::Tensor x, torch::Tensor b);
"""

ext = load_inline(
    name="ks_test_scale_relu_ext",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["scale_relu", "scale_relu_partial", "scale_relu_fixed", "scale_relu_inplace",
               "scale_relu_broken"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)
