"""Times the channels-last elementwise kernels on level-2 conv-output shapes (fifteenth session).

level2/52's epilogue chain (6 operands) and level2/93's (2 operands), each read from a
channels-last input into the contiguous output, against the same kernels on a contiguous input
(NCHW) and torch's own channels-last -> contiguous copy; every NHWC result is compared with the
NCHW one.  Usage: python nhwc_ab.py [ncu]  (ncu: one call of each kernel on 52's shape, inside a
cudaProfilerStart/Stop window).
"""
import sys
import time
from dataclasses import replace

import torch
from kernelstitch.agents.coder.codegen import (
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    ElementwiseSpec,
    TensorArg,
    build_extension_sources,
    emit,
)
from kernelstitch.agents.coder.codegen import ElementwiseOp as E
from torch.utils.cpp_extension import load_inline


def arg(name):
    return TensorArg(name, "float32")


S52 = ElementwiseSpec(
    "ab52", (arg("x"), arg("b"), arg("m"), arg("r"), arg("w"), arg("bb")),
    (E("add", ("x", "b"), "t0"), E("softplus", ("t0",), "t1"), E("tanh", ("t1",), "t2"), E("mul", ("t2", "t0"), "t3"),
     E("sub", ("t3", "m"), "t4"), E("mul", ("t4", "r"), "t5"), E("mul", ("t5", "w"), "t6"), E("add", ("t6", "bb"), "y")),
    ("y",), "float32")
S93 = ElementwiseSpec(
    "ab93", (arg("x"), arg("b")),
    (E("add", ("x", "b"), "t0"), E("add", ("t0", 0.5), "t1"), E("minimum", ("t1", 0.0), "t2"), E("gelu", ("t2",), "t3"),
     E("mul", ("t3", 2.0), "y")), ("y",), "float32")
SHAPES = [(64, 128, 126, 126), (128, 128, 130, 130), (128, 64, 126, 126), (128, 16, 254, 254), (32, 96, 63, 63),
          (16, 16, 32, 62, 62)]


def build():
    specs = [replace(S52, tiled_inputs=(0,)), replace(S93, tiled_inputs=(0,))]
    cpp, cuda, names = build_extension_sources([emit(spec) for spec in specs])
    return load_inline(name="ks_ab_three", cpp_sources=[cpp], cuda_sources=[cuda], functions=names,
                       extra_cflags=list(EXTRA_CFLAGS), extra_cuda_cflags=list(EXTRA_CUDA_CFLAGS),
                       extra_ldflags=list(EXTRA_LDFLAGS), verbose=False)


def timed(fn, *args, reps=20):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def per_channel(c, count):
    return tuple(torch.randn(c, device="cuda").view(-1, 1, 1) for _ in range(count))


def main():
    started = time.time()
    ext = build()
    print(f"built in {time.time() - started:.0f} s", flush=True)
    if sys.argv[1:] == ["ncu"]:
        x = torch.randn(64, 128, 126, 126, device="cuda")
        xl = x.contiguous(memory_format=torch.channels_last)
        ops = per_channel(128, 5)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        ext.ab52(xl, *ops)
        ext.ab52(x, *ops)
        ext.ab93(xl, ops[0])
        ext.ab93(x, ops[0])
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        return
    for shape in SHAPES:
        x = torch.randn(*shape, device="cuda")
        fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
        xl = x.contiguous(memory_format=fmt)
        extra = [(1, 1, 1)] if x.dim() == 4 else [(1, 1, 1, 1)]
        ops = {"ab52": [t.view(-1, *extra[0]) for t in per_channel(shape[1], 5)]}
        ops["ab93"] = ops["ab52"][:1]
        ops["ab52"][2] = ops["ab52"][2].abs()
        gb = 2 * x.numel() * 4 / 1e9
        row = [f"{str(shape):22}"]
        for name in ("ab52", "ab93"):
            fn = getattr(ext, name)
            torch.testing.assert_close(fn(xl, *ops[name]), fn(x, *ops[name]), rtol=2e-5, atol=2e-5)
            for label, t in (("nhwc", xl), ("nchw", x)):
                ms = timed(fn, t, *ops[name])
                row.append(f"{name}:{label} {ms:.3f} ms {gb / ms:.2f} TB/s")
        ms = timed(lambda t: t.contiguous(), xl)
        row.append(f"torch copy cl->contiguous {ms:.3f} ms {gb / ms:.2f} TB/s")
        print("\n  ".join(row), flush=True)


if __name__ == "__main__":
    main()
