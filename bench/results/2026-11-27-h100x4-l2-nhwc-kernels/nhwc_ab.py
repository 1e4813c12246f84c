"""A/B of the channels-last elementwise kernel's tile orientation (fifteenth session): the same
specs built three ways (launcher's rule, tiles along C forced, tiles along S forced), timed on
channels-last inputs of level-2 conv-output shapes; the NCHW kernel and torch's copy as references."""
import sys, time
import torch
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
from kernelstitch.agents.coder.codegen import (EXTRA_CFLAGS, EXTRA_CUDA_CFLAGS, EXTRA_LDFLAGS, ElementwiseOp as E,
                                               ElementwiseSpec, TensorArg, build_extension_sources, emit)

T = lambda n: TensorArg(n, "float32")
S52 = ElementwiseSpec("ab52", (T("x"), T("b"), T("m"), T("r"), T("w"), T("bb")),
    (E("add", ("x", "b"), "t0"), E("softplus", ("t0",), "t1"), E("tanh", ("t1",), "t2"), E("mul", ("t2", "t0"), "t3"),
     E("sub", ("t3", "m"), "t4"), E("mul", ("t4", "r"), "t5"), E("mul", ("t5", "w"), "t6"), E("add", ("t6", "bb"), "y")),
    ("y",), "float32")
S93 = ElementwiseSpec("ab93", (T("x"), T("b")),
    (E("add", ("x", "b"), "t0"), E("add", ("t0", 0.5), "t1"), E("minimum", ("t1", 0.0), "t2"), E("gelu", ("t2",), "t3"),
     E("mul", ("t3", 2.0), "y")), ("y",), "float32")
RULE = "const bool along_c = C >= 32 * 4;"

def build():
    from dataclasses import replace as dc_replace
    specs = [dc_replace(S52, tiled_inputs=(0,)), dc_replace(S93, tiled_inputs=(0,))]
    cpp, cuda, names = build_extension_sources([emit(sp) for sp in specs])
    return load_inline(name="ks_ab_two", cpp_sources=[cpp], cuda_sources=[cuda],
                       functions=names, extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


def timed(fn, *args, reps=20):
    for _ in range(3): fn(*args)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps): fn(*args)
    b.record(); torch.cuda.synchronize()
    return a.elapsed_time(b) / reps

t0 = time.time()
one = build()
print(f"built in {time.time() - t0:.0f} s", flush=True)
exts = {"rule": one}
cv = lambda C: torch.randn(C, device="cuda").view(-1, 1, 1)
for shape in [(64, 128, 126, 126), (128, 128, 130, 130), (128, 64, 126, 126), (128, 16, 254, 254), (32, 96, 63, 63)]:
    N, C = shape[:2]
    x = torch.randn(*shape, device="cuda")
    xl = x.contiguous(memory_format=torch.channels_last)
    ops52 = (xl, cv(C), cv(C), cv(C).abs(), cv(C), cv(C))
    ops93 = (xl, cv(C))
    gb = 2 * x.numel() * 4 / 1e9
    row = [f"{str(shape):22}"]
    for label, ext in exts.items():
        for name, ops in (("ab52", ops52), ("ab93", ops93)):
            ms = timed(getattr(ext, name), *ops)
            row.append(f"{name}:{label} {ms:.3f} ms {gb / ms:.2f} TB/s")
    ref = exts["rule"]
    for name, ops in (("ab52", ops52), ("ab93", ops93)):
        want = getattr(ref, name)(x, *ops[1:])
        for label, ext in exts.items():
            got = getattr(ext, name)(*ops)
            torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)
        ms = timed(getattr(ref, name), x, *ops[1:])
        row.append(f"{name}:nchw {ms:.3f} ms {gb / ms:.2f} TB/s")
    ms = timed(lambda t: t.contiguous(), xl)
    row.append(f"torch copy cl->nchw {ms:.3f} ms {gb / ms:.2f} TB/s")
    print("\n  ".join(row), flush=True)
