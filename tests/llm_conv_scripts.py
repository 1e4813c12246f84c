"""LLM-style candidates for examples/conv2d_bias_relu.py (the convolution left to PyTorch, as the
built-in plan keeps it; bias + relu + multiply-add in the file's own kernel) and the allowance
the pipeline grants them: shared by tests/test_llm_allowance.py and its GPU counterpart."""

from __future__ import annotations

from pathlib import Path

from kernelstitch.agents.verifier.declaration import TorchOpAllowance

CONV = Path(__file__).resolve().parents[1] / "examples" / "conv2d_bias_relu.py"
CONV_CHAIN = ("aten::_convolution", "aten::conv2d", "aten::convolution",
              "aten::cudnn_convolution")
CONV_ALLOWANCE = TorchOpAllowance({op: "library_call" for op in CONV_CHAIN},
                                  "the built-in planner's plan of Model (test)",
                                  ("torch.ops.aten.conv2d.default",))

# An LLM candidate for examples/conv2d_bias_relu.py: the convolution (without its bias) through
# PyTorch, as the built-in plan keeps it, then bias + relu + multiply-add in its own kernel.
_CONV_FILE = '''"""ModelNew for conv2d_bias_relu: cuDNN convolution, then one fused epilogue kernel."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
{declaration}
CUDA_SOURCE = r\'\'\'
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void epilogue_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                float* __restrict__ out, float mul, float add,
                                long long hw, long long channels, long long n) {{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {{
        float v = fmaxf(y[i] + bias[(i / hw) % channels], 0.0f);
        out[i] = v * mul + add;
    }}
}}

torch::Tensor epilogue(torch::Tensor y, torch::Tensor bias, double mul, double add) {{
    TORCH_CHECK(y.is_cuda() && y.is_contiguous(), "contiguous CUDA input expected");
    auto out = torch::empty_like(y);
    long long n = y.numel();
    if (n == 0) return out;
    long long hw = y.size(2) * y.size(3);
    long long blocks = std::min<long long>((n + 255) / 256, 65535LL * 8);
    epilogue_kernel<<<(unsigned)blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), (float)mul,
        (float)add, hw, y.size(1), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}}
\'\'\'

CPP_SOURCE = "torch::Tensor epilogue(torch::Tensor y, torch::Tensor bias, double mul, double add);"


class _LazyExtension:
    def __init__(self):
        self._module = None

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._module is None:
            self._module = load_inline(name="ks_llm_conv_{tag}", cpp_sources=CPP_SOURCE,
                                       cuda_sources=CUDA_SOURCE, functions=["epilogue"])
        return getattr(self._module, name)


_EXT = _LazyExtension()


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier, offset):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.multiplier = multiplier
        self.offset = offset

    def forward(self, x):
        y = {conv}(x, self.conv.weight, None, self.conv.stride, self.conv.padding)
{forward}
'''
_EPILOGUE = ("        return _EXT.epilogue(y.contiguous(), self.conv.bias, self.multiplier, "
             "self.offset)")
_RELU_EPILOGUE = "        y = torch.relu(y)  # PyTorch's relu: not allowed\n" + _EPILOGUE
_DECLARES_RELU = ("\nKERNELSTITCH_TORCH_OPS = {'aten::conv2d': 'library_call', "
                  "'aten::relu': 'library_call', 'aten::clamp_min': 'library_call'}\n")


def conv_candidate(*, conv: str = "F.conv2d", forward: str = _EPILOGUE, declaration: str = "",
                   tag: str = "a") -> str:
    return _CONV_FILE.format(conv=conv, forward=forward, declaration=declaration, tag=tag)


HONEST = conv_candidate(tag="honest")
HONEST_ATEN = conv_candidate(conv="torch.ops.aten.conv2d.default", tag="aten")
CALLS_RELU = conv_candidate(forward=_RELU_EPILOGUE, tag="relu")
DECLARES_RELU = conv_candidate(forward=_RELU_EPILOGUE, declaration=_DECLARES_RELU, tag="decl")
TRANSPOSED = conv_candidate(conv="F.conv_transpose2d", tag="transposed")  # same family: not allowed
