import torch
from kernelstitch.agents.codegen import (
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    ReductionSpec,
    TensorArg,
    build_extension_sources,
    emit,
)
from torch.utils.cpp_extension import load_inline

specs = [ReductionSpec("t_sum_d1", "sum", (TensorArg("x", "float32"),), dim=1, keepdim=True,
                       out_dtype="float32"),
         ReductionSpec("t_sum_last", "sum", (TensorArg("x", "float32"),), dim=-1, keepdim=False,
                       out_dtype="float32")]
cpp, cuda, names = build_extension_sources([emit(s) for s in specs])
open("/tmp/segv_main.cpp", "w").write(cpp)
ext = load_inline(name="ks_segv", cpp_sources=[cpp], cuda_sources=[cuda], functions=names,
                  extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                  extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)
print("built", flush=True)
x = torch.randn(4, 8, device="cuda")
print("ok call", ext.t_sum_last(x).sum().item(), flush=True)
for label, fn, arg in [("dtype", ext.t_sum_last, x.half()), ("dim", ext.t_sum_d1, torch.randn(5, device="cuda"))]:
    try:
        fn(arg)
        print(label, "did not raise", flush=True)
    except RuntimeError as exc:
        print(label, "raised:", str(exc)[:200], flush=True)
