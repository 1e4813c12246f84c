"""The CUDA extension of the masked-softmax test candidates (_masked_softmax.cu), compiled once
and cached by torch."""

from pathlib import Path

from torch.utils.cpp_extension import load

ext = load(name="ks_test_masked_softmax_ext",
           sources=[str(Path(__file__).with_name("_masked_softmax.cu"))],
           extra_cuda_cflags=["-O3"], verbose=False)
