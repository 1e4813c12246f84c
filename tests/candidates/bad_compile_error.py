"""A candidate whose CUDA source does not compile (an undeclared identifier on one line)."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>

__global__ void scale_relu_kernel(const float* x, const float* b, float* out, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(x[i] * 2.0f + b[i % cols], 0.0f);
}

torch::Tensor scale_relu_bad(torch::Tensor x, torch::Tensor b) {
    auto out = torch::empty_like(x);
    long long n = x.numel();
    scale_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), b.data_ptr<float>(),
                                                out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(
    name="ks_test_bad_compile",
    cpp_sources="torch::Tensor scale_relu_bad(torch::Tensor x, torch::Tensor b);",
    cuda_sources=cuda_source,
    functions=["scale_relu_bad"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return ext.scale_relu_bad(x, self.bias)
