"""The attention kernel alone (tests/test_codegen.py's specs, one load_inline) at KernelBench
VisionAttention's shape (8 x 16384 x 16384, head dim 32, fp32) and ReLUSelfAttention's
(192 x 1024 x 1024, head dim 64, relu, tril mask): the GPU time of 5 back-to-back calls after a
warm-up, per call, with the kernelstitch CUDA-event timer.  Also an ncu target
(`ncu --kernel-name regex:att_.*_kernel python bench/attention_kernel_timing.py`).
Run from the repository root on a GPU machine."""

import sys

sys.path.insert(0, "tests")

import torch  # noqa: E402
from test_codegen import attention_specs  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402

from kernelstitch.core.cuda_timing import CudaTimer  # noqa: E402


def main() -> None:
    specs = {s.name: s for s in attention_specs()}
    ext = load_kernels("ks_attention_prof", [specs["att_d32"], specs["att_d64_relu_nonzero"]])
    q = torch.randn(8, 16384, 32, device="cuda")
    q2 = torch.randn(16, 12, 1024, 64, device="cuda")
    tril = torch.ones(1024, 1024, device="cuda").tril().view(1, 1, 1024, 1024)
    cases = (("d32", lambda: ext.att_d32(q, q, q)),
             ("d64_relu_tril", lambda: ext.att_d64_relu_nonzero(q2, q2, q2, tril)))
    timer = CudaTimer()
    for name, call in cases:
        call()
        timer.synchronize()
        print(name, f"{timer.span(call, repeat=5).gpu_ms:.3f} ms")


if __name__ == "__main__":
    main()
