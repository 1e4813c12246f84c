"""ncu target: the attention kernel at KernelBench VisionAttention's shape (8 x 16384 x 16384,
head dim 32, fp32) and ReLUSelfAttention's (192 x 1024 x 1024, head dim 64, relu, tril mask)."""
import sys
sys.path.insert(0, "tests")
import torch
from test_codegen import attention_specs
from test_codegen_gpu import load_kernels

specs = {s.name: s for s in attention_specs()}
ext = load_kernels("ks_attention_prof", [specs["att_d32"], specs["att_d64_relu_nonzero"]])
q = torch.randn(8, 16384, 32, device="cuda")
ext.att_d32(q, q, q)
torch.cuda.synchronize()
q2 = torch.randn(16, 12, 1024, 64, device="cuda")
mask = torch.ones(1024, 1024, device="cuda").tril().view(1, 1, 1024, 1024)
for _ in range(2):
    ext.att_d64_relu_nonzero(q2, q2, q2, mask)
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for name, call in (("d32", lambda: ext.att_d32(q, q, q)), ("d64_relu_tril", lambda: ext.att_d64_relu_nonzero(q2, q2, q2, mask))):
    call()
    start.record()
    for _ in range(5):
        call()
    end.record()
    torch.cuda.synchronize()
    print(name, f"{start.elapsed_time(end) / 5:.3f} ms")
