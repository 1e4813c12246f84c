"""Emitted kernels against PyTorch on the GPU: the test specs built with load_inline (one
extension, or several built at once on a many-core machine: load_kernels), fresh random inputs
per check, outputs allocated on NaN-poisoned memory (unwritten elements show)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

from kernelstitch.agents.coder.codegen import (
    EXTRA_CFLAGS,
    EXTRA_CUDA_CFLAGS,
    EXTRA_LDFLAGS,
    ElementwiseOp,
    ElementwiseSpec,
    GemmSpec,
    ReductionSpec,
    TensorArg,
    build_extension_sources,
    emit,
    split_extension_kernels,
)
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import UNARY_OPS

from kernelstitch.core.nvcc import split_compile_flags  # noqa: E402

E = ElementwiseOp
F = torch.nn.functional
TORCH_DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1e-2)}

UNARY_REF = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 0.1), "sqrt": lambda x: torch.sqrt(x.abs() + 0.1),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1), "reciprocal": lambda x: torch.reciprocal(x.abs() + 0.1),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "softplus": F.softplus, "mish": F.mish, "elu": F.elu, "selu": F.selu, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "square": torch.square,
}
POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt", "reciprocal"}


def _chain(name, dtype, out_dtype=None):
    return ElementwiseSpec(
        name, (TensorArg("x", dtype), TensorArg("b", dtype)),
        (E("add", ("x", "b"), "t0"), E("gelu", ("t0",), "t1"), E("mul", ("t1", 2.0), "t2"), E("tanh", ("t2",), "y")),
        ("y",), out_dtype or dtype,
    )


def _chain_ref(x, b):
    return torch.tanh(F.gelu(x.float() + b.float()) * 2.0)


def _unary_spec():
    ops = []
    for op in sorted(UNARY_OPS):
        if op in POSITIVE_DOMAIN:
            ops += [E("abs", ("x",), f"a_{op}"), E("add", (f"a_{op}", 0.1), f"p_{op}"), E(op, (f"p_{op}",), f"u_{op}")]
        else:
            ops.append(E(op, ("x",), f"u_{op}"))
    return ElementwiseSpec("t_unary", (TensorArg("x", "float32"),), tuple(ops), tuple(f"u_{o}" for o in sorted(UNARY_OPS)), "float32")


BINARY_REF = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "pow": lambda x, y: torch.pow(x.abs() + 0.5, y),
    "xlogy": lambda x, y: torch.xlogy(torch.relu(x), y.abs() + 0.5),
}


def _binary_spec():
    ops = []
    for op in sorted(BINARY_REF):
        if op == "pow":
            ops += [E("abs", ("x",), "ax"), E("add", ("ax", 0.5), "px"), E("pow", ("px", "y"), "b_pow")]
        elif op == "xlogy":  # x >= 0 with exact zeros (relu), y > 0
            ops += [E("relu", ("x",), "rx"), E("abs", ("y",), "ay"), E("add", ("ay", 0.5), "py"),
                    E("xlogy", ("rx", "py"), "b_xlogy")]
        else:
            ops.append(E(op, ("x", "y"), f"b_{op}"))
    ops += [
        E("clamp", ("x",), "c1", (("max", 0.5), ("min", -0.25))),
        E("leaky_relu", ("x",), "lr", (("negative_slope", 0.1),)),
        E("where", ("y", "x", 3.0), "wh"),
    ]
    outs = tuple(f"b_{op}" for op in sorted(BINARY_REF)) + ("c1", "lr", "wh")
    return ElementwiseSpec("t_binary", (TensorArg("x", "float32"), TensorArg("y", "float32")), tuple(ops), outs, "float32")


def _specs():
    specs = [_chain(f"t_chain_{d}", d) for d in TORCH_DT]
    specs += [_chain("t_chain_mixed", "float32", "bfloat16"), _unary_spec(), _binary_spec()]
    # mish written out (level2/52): tanh(softplus(x)) * x, the tanh of a softplus one expression
    specs.append(ElementwiseSpec("t_tanh_softplus", (TensorArg("x", "float32"),), (
        E("softplus", ("x",), "s"), E("tanh", ("s",), "t"), E("mul", ("t", "x"), "y")), ("t", "y"), "float32"))
    # a copy but for the name (compiled once, its binding calls t_chain_float32's launchers), and
    # one whose tiled path exists for operand 0 only
    specs += [replace(specs[0], name="t_chain_alias"), replace(specs[0], name="t_chain_tiled0", tiled_inputs=(0,))]
    for kind in ("sum", "mean", "amax", "amin", "logsumexp"):
        specs.append(ReductionSpec(
            f"t_{kind}", kind, (TensorArg("x", "float32"), TensorArg("s", "float32"), TensorArg("e", "float32")),
            dim=-1, keepdim=False, out_dtype="float32", prologue=(E("mul", ("x", "s"), "p"),), prologue_out="p",
            epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
        specs.append(ReductionSpec(f"t_{kind}_d1", kind, (TensorArg("x", "float32"),), dim=1, keepdim=True, out_dtype="float32"))
    for kind in ("softmax", "log_softmax"):
        specs.append(ReductionSpec(
            f"t_{kind}", kind, (TensorArg("x", "float32"), TensorArg("b", "float32")), dim=-1, keepdim=False,
            out_dtype="float32", prologue=(E("add", ("x", "b"), "p"), E("mul", ("p", 0.5), "q")), prologue_out="q"))
        specs.append(ReductionSpec(f"t_{kind}_d1", kind, (TensorArg("x", "float32"),), dim=1, keepdim=False, out_dtype="float32"))
    # an elementwise step the coder keeps channels-last (a batch_norm apply + ReLU between convs)
    specs.append(ElementwiseSpec(
        "t_keep_cl", (TensorArg("x", "float32"), TensorArg("m", "float32"), TensorArg("r", "float32")),
        (E("mul", ("x", "m"), "t"), E("add", ("t", "r"), "u"), E("relu", ("u",), "y")), ("y",), "float32",
        keep_channels_last=True))
    # a bf16 log_softmax over the channels with two per-channel epilogue operands (the NHWC
    # kernel stages them in shared memory)
    specs.append(ReductionSpec(
        "t_log_softmax_epi_bf16", "log_softmax", (TensorArg("x", "bfloat16"), TensorArg("e1", "float32"),
                                                  TensorArg("e2", "float32")),
        dim=1, keepdim=False, out_dtype="bfloat16", epilogue=(E("mul", ("acc", "e1"), "m"), E("add", ("m", "e2"), "o")),
        epilogue_out="o", epilogue_inputs=("e1", "e2")))
    # group_norm as after a conv: bias and GELU in the prologue, affine, a per-channel epilogue
    # operand; a channels-last input takes the NHWC kernels (gn_nhwc.cu)
    specs.append(ReductionSpec(
        "t_gn_conv", "group_norm", (TensorArg("x", "float32"), TensorArg("cb", "float32"), TensorArg("w", "float32"),
                                    TensorArg("bb", "float32"), TensorArg("e", "float32")),
        dim=1, keepdim=False, out_dtype="float32", groups=8, weight="w", bias="bb",
        prologue=(E("add", ("x", "cb"), "p"), E("gelu", ("p",), "g")), prologue_out="g",
        epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",), trailing=True))
    # the same group_norm with its output kept channels-last (the coder's layout: NHWC readers)
    specs.append(ReductionSpec(
        "t_gn_conv_keep", "group_norm", (TensorArg("x", "float32"), TensorArg("cb", "float32"),
                                         TensorArg("w", "float32"), TensorArg("bb", "float32"),
                                         TensorArg("e", "float32")),
        dim=1, keepdim=False, out_dtype="float32", groups=8, weight="w", bias="bb",
        prologue=(E("add", ("x", "cb"), "p"), E("gelu", ("p",), "g")), prologue_out="g",
        epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",), trailing=True,
        keep_channels_last=True))
    # global pooling (every spatial dim; column kernels built, so a channels-last input is read as
    # [N, S, C] columns) and a reduction over all but the batch dim (rows in either layout)
    specs.append(ReductionSpec(
        "t_mean_spatial_chan", "mean", (TensorArg("x", "float32"), TensorArg("b", "float32"), TensorArg("e", "float32")),
        dim=2, dim_count=2, keepdim=True, out_dtype="float32", prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
        epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    specs.append(ReductionSpec("t_amax_spatial3", "amax", (TensorArg("x", "float32"),), dim=2, dim_count=3,
                               keepdim=False, out_dtype="float32"))
    specs.append(ReductionSpec("t_sum_but_batch", "sum", (TensorArg("x", "float32"),), dim=1, dim_count=3,
                               keepdim=False, out_dtype="float32", trailing=True))
    # strided dims with a per-channel operand (a conv bias) in the prologue and one in the epilogue
    specs.append(ReductionSpec(
        "t_softmax_d1_chan", "softmax", (TensorArg("x", "float32"), TensorArg("b", "float32")), dim=1,
        keepdim=False, out_dtype="float32", prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
        epilogue=(E("sigmoid", ("acc",), "o"),), epilogue_out="o"))
    specs.append(ReductionSpec(
        "t_logsumexp_d1_chan", "logsumexp", (TensorArg("x", "float32"), TensorArg("b", "float32"),
                                             TensorArg("e", "float32")),
        dim=1, keepdim=False, out_dtype="float32", prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
        epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    specs.append(ReductionSpec(
        "t_softmax_d1_f16", "softmax", (TensorArg("x", "float16"), TensorArg("e", "float16")), dim=1, keepdim=False,
        out_dtype="float16", prologue=(E("mul", ("x", 0.5), "p"),), prologue_out="p",
        epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    for d in TORCH_DT:
        specs.append(ReductionSpec(f"t_softmax_{d}", "softmax", (TensorArg("x", d),), -1, False, d))
        specs.append(ReductionSpec(
            f"t_ln_{d}", "layer_norm", (TensorArg("x", d), TensorArg("w", d), TensorArg("bb", d)), -1, False, d,
            weight="w", bias="bb", epilogue=(E("relu", ("acc",), "r"),), epilogue_out="r"))
    specs.append(ReductionSpec("t_ln2", "layer_norm", (TensorArg("x", "float32"),), -1, False, "float32", norm_ndim=2, eps=1e-6))
    specs.append(ReductionSpec("t_sum_bf16", "sum", (TensorArg("x", "bfloat16"),), 0, False, "float32"))
    specs += [
        GemmSpec("t_gemm_relu", TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"), "relu", "float32"),
        GemmSpec("t_gemm_gelu_tanh", TensorArg("x", "float16"), TensorArg("w", "float16"), TensorArg("b", "float16"), "gelu_tanh", "float16"),
        GemmSpec("t_gemm_gelu_bf16", TensorArg("x", "bfloat16"), TensorArg("w", "bfloat16"), TensorArg("b", "bfloat16"), "gelu", "bfloat16"),
        GemmSpec("t_gemm_plain_kn", TensorArg("x", "float32"), TensorArg("w", "float32"), None, "none", "float32", "kn"),
    ]
    return specs


# Builds one part in a child process (torch's JIT build, then nothing): the parent then loads
# every part from torch's extension folder, where the sources' hash finds them built.
_BUILD_PART = """
import json, sys
from torch.utils.cpp_extension import load_inline
a = json.loads(sys.stdin.read())
load_inline(name=a["name"], cpp_sources=[a["cpp"]], cuda_sources=[a["cuda"]], functions=a["functions"],
            extra_cflags=a["cflags"], extra_cuda_cflags=a["cuda_cflags"], extra_ldflags=a["ldflags"], verbose=False)
"""


def extension_parts() -> int:
    """How many extensions load_kernels builds at once: $KS_TEST_EXTENSION_PARTS, else one per
    two cores (at most 8; a load_inline build runs two compilers, the binding and the kernels)."""
    env = os.environ.get("KS_TEST_EXTENSION_PARTS")
    if env:
        return max(1, int(env))
    return max(1, min(8, (os.cpu_count() or 2) // 2))


class Kernels:
    """The functions of several extensions under one namespace (`ext.t_chain_float32`)."""

    def __init__(self, modules: list) -> None:
        self._modules = modules

    def __getattr__(self, attr: str):
        for module in self._modules:
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(attr)


def load_kernels(name: str, specs: list, parts: int | None = None):
    """Every spec's kernel in load_inline extensions called `name` (one part) or `name`_p0.. built
    at once in child processes (split_extension_kernels: nvcc compiles one translation unit on one
    core, and one unit of the codegen specs took 170-240 s on the 16-core GPU machine)."""
    from torch.utils.cpp_extension import load_inline

    sources = [s if isinstance(s, KernelSource) else emit(s) for s in specs]  # specs or emitted kernels
    groups = split_extension_kernels(sources, extension_parts() if parts is None else parts)
    sources = [build_extension_sources(group) for group in groups]
    names = [name] if len(groups) == 1 else [f"{name}_p{k}" for k in range(len(groups))]
    # each part's nvcc optimises its kernels over the cores the parts share (the first setup of
    # this module built for 120 s on the H100 host, s35)
    cuda_cflags = list(EXTRA_CUDA_CFLAGS) + split_compile_flags((os.cpu_count() or 1) // len(groups))
    flags = {"cflags": list(EXTRA_CFLAGS), "cuda_cflags": cuda_cflags, "ldflags": list(EXTRA_LDFLAGS)}
    if len(groups) > 1:
        def build(k: int) -> subprocess.CompletedProcess:
            cpp, cuda, functions = sources[k]
            payload = json.dumps({"name": names[k], "cpp": cpp, "cuda": cuda, "functions": functions, **flags})
            return subprocess.run([sys.executable, "-c", _BUILD_PART], input=payload, text=True,
                                  capture_output=True, check=False)

        with ThreadPoolExecutor(len(groups)) as pool:
            failed = [done for done in pool.map(build, range(len(groups))) if done.returncode != 0]
        if failed:  # the loads below then build (and fail) in this process, one at a time
            warnings.warn(f"{name}: a parallel build failed; building in-process: {failed[0].stderr[-2000:]}",
                          stacklevel=2)
    modules = [
        load_inline(name=n, cpp_sources=[cpp], cuda_sources=[cuda], functions=functions,
                    extra_cflags=flags["cflags"], extra_cuda_cflags=flags["cuda_cflags"],
                    extra_ldflags=flags["ldflags"], verbose=False)
        for n, (cpp, cuda, functions) in zip(names, sources)
    ]
    return modules[0] if len(modules) == 1 else Kernels(modules)


@pytest.fixture(scope="module")
def ext():
    return load_kernels("ks_codegen_gpu_tests", _specs())


def poisoned(fn, *args):
    """Calls fn after filling the allocator's free memory with NaN, so outputs from at::empty
    start as NaN and any element the kernel skips fails the comparison."""
    junk = torch.full((64 << 20,), float("nan"), device="cuda")
    del junk
    out = fn(*args)
    torch.cuda.synchronize()
    return out


def check(got, want, rtol=None, atol=None):
    """Tolerances default to the output dtype's (fp32 ~1e-5 relative)."""
    rtol = TOL[got.dtype][0] if rtol is None else rtol
    atol = TOL[got.dtype][1] if atol is None else atol
    assert got.shape == want.shape, (got.shape, want.shape)
    assert not torch.isnan(got).any() or torch.isnan(want).any(), "unwritten (NaN) outputs"
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol)


def rnd(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda").to(dtype)


# ---------------------------------------------------------------- elementwise


@pytest.mark.parametrize("d", list(TORCH_DT))
@pytest.mark.parametrize(
    "xs,bs", [((1_000_003,), (1_000_003,)), ((37, 129), (129,)), ((37, 128), (37, 1)), ((4, 6, 5, 7), (6, 1, 1)), ((5, 3), (1,))],
)
def test_chain_broadcasts_and_tails(ext, d, xs, bs):
    dt = TORCH_DT[d]
    x, b = rnd(*xs, dtype=dt), rnd(*bs, dtype=dt)
    check(poisoned(getattr(ext, f"t_chain_{d}"), x, b), _chain_ref(x, b).to(dt))


@pytest.mark.parametrize("d", list(TORCH_DT))
@pytest.mark.parametrize("shape", [(128, 128, 64, 64), (3, 40, 7, 9), (1, 33, 5, 70), (2, 16, 3, 4, 5),
                                   (4, 7, 33, 35), (2, 31, 3, 50), (3, 16, 5, 6, 7),
                                   (2, 20, 5, 4), (3, 40, 8, 9), (2, 64, 6, 6)])
def test_chain_reads_channels_last_into_contiguous_output(ext, d, shape):
    """A channels-last operand (a cuDNN NHWC conv output) takes the tiled transpose kernel; the
    output is the contiguous tensor the reference returns.  Per-channel bias from a [C, 1, 1]
    view, either operand tiled, tails in both tile dims; fewer than 32 channels (the narrow
    kernel) in 4-D and 5-D."""
    dt = TORCH_DT[d]
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = rnd(*shape, dtype=dt).contiguous(memory_format=fmt)
    b = rnd(shape[1], dtype=dt).view(-1, *([1] * (len(shape) - 2)))
    f = getattr(ext, f"t_chain_{d}")
    got = poisoned(f, x, b)
    assert got.is_contiguous()
    check(got, _chain_ref(x, b).to(dt))
    check(poisoned(f, b.expand(shape).contiguous(), x), _chain_ref(x, b).to(dt))  # operand 1 tiled
    if d == "float32" and shape[0] == 128 and torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert any("t_chain_float32_nhwc" in k for k in _kernels_run(f, x, b))


@pytest.mark.parametrize("shape", [(2, 64, 6, 6), (3, 40, 8, 9), (2, 16, 3, 4, 5), (2, 20, 5, 4)])
def test_channels_last_fp32_with_per_channel_operands_any_alignment(ext, shape):
    """fp32 channels-last with a per-channel operand (partial 32-channel tiles, 5-D), a misaligned
    channels-last view and a full-size second operand: the tiled kernels give torch's values."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = rnd(*shape).contiguous(memory_format=fmt)
    b = rnd(shape[1]).view(-1, *([1] * (len(shape) - 2)))
    f = ext.t_chain_float32
    want = _chain_ref(x, b)
    check(poisoned(f, x, b), want)
    assert any("t_chain_float32_nhwc" in k for k in _kernels_run(f, x, b))
    storage = torch.empty(x.numel() + 1, device="cuda")
    shifted = storage[1:].as_strided(x.shape, x.stride())
    shifted.copy_(x)
    check(poisoned(f, shifted, b), want)
    full = b.expand(shape).contiguous()
    check(poisoned(f, x, full), want)


@pytest.mark.parametrize("shape", [(128, 128, 64, 64), (3, 40, 7, 9)])
def test_deduplicated_and_partly_tiled_kernels(ext, shape):
    """The copy compiled once gives its original's results; a kernel whose tiled path exists for
    operand 0 only reads a channels-last operand 1 through the general path, still exactly."""
    x = rnd(*shape).contiguous(memory_format=torch.channels_last)
    b = rnd(shape[1]).view(-1, 1, 1)
    want = _chain_ref(x, b)
    check(poisoned(ext.t_chain_alias, x, b), want)
    check(poisoned(ext.t_chain_tiled0, x, b), want)
    check(poisoned(ext.t_chain_tiled0, b.expand(shape).contiguous(), x), want)
    if shape[0] == 128:
        assert any("t_chain_float32_nhwc" in k for k in _kernels_run(ext.t_chain_alias, x, b))
        assert not any("nhwc" in k for k in _kernels_run(ext.t_chain_tiled0, b.expand(shape).contiguous(), x))


def test_chain_noncontiguous_and_misaligned(ext):
    f = ext.t_chain_float32
    x = rnd(300, 257).t()  # transposed: strided path
    b = rnd(300)
    check(poisoned(f, x, b), _chain_ref(x, b))
    base = rnd(4097)
    x = base[1:]  # contiguous but 4 bytes off 16-byte alignment: must take the scalar path
    b = rnd(4096)
    check(poisoned(f, x, b), _chain_ref(x, b))
    xb, bb = rnd(8, 3, 16)[:, 1], rnd(16)  # sliced view
    check(poisoned(f, xb, bb), _chain_ref(xb, bb))


def test_an_operand_of_more_dims_than_a_descriptor_holds_is_read_from_its_copy(ext):
    """A permuted 7-D operand collapses to 7 dims, more than KS_MAX_RANK: the binding
    materialises it (ks_describe) and the kernel must read that copy, not the original memory."""
    x = rnd(*[2] * 7).permute(6, 5, 4, 3, 2, 1, 0)
    b = rnd(2)
    check(poisoned(ext.t_chain_float32, x, b), _chain_ref(x, b))


def test_mixed_output_dtype(ext):
    x, b = rnd(1023, 33), rnd(33)
    check(poisoned(ext.t_chain_mixed, x, b), _chain_ref(x, b).bfloat16())


def test_every_unary_op(ext):
    x = rnd(100_001) * 3
    outs = poisoned(ext.t_unary, x)
    for op, got in zip(sorted(UNARY_OPS), outs):
        want = UNARY_REF[op](x)
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5, msg=lambda m, op=op: f"{op}: {m}")
    # mish's closed form (x n / (n + 2), n = e^x (e^x + 2)) over the whole range: underflow to
    # -0, the softplus threshold at 20, overflowing exponentials past it
    wide = torch.linspace(-120, 120, 24_001, device="cuda")
    got = poisoned(ext.t_unary, wide)[sorted(UNARY_OPS).index("mish")]
    torch.testing.assert_close(got, F.mish(wide), rtol=2e-5, atol=1e-6)
    # the same closed form where mish is written out as tanh(softplus(x)) * x (ks_tanh_softplus)
    t, y = poisoned(ext.t_tanh_softplus, wide)
    torch.testing.assert_close(t, torch.tanh(F.softplus(wide)), rtol=2e-5, atol=1e-6)
    torch.testing.assert_close(y, torch.tanh(F.softplus(wide)) * wide, rtol=2e-5, atol=1e-6)


def test_binary_and_attr_ops(ext):
    x, y = rnd(999, 17), rnd(17)
    outs = poisoned(ext.t_binary, x, y)
    wants = [BINARY_REF[op](x, y) for op in sorted(BINARY_REF)] + [
        x.clamp(-0.25, 0.5), F.leaky_relu(x, 0.1), torch.where(y.expand_as(x) != 0, x, torch.full_like(x, 3.0)),
    ]
    for got, want in zip(outs, wants):
        torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("shape", [(3, 40, 7, 9), (2, 70, 33, 5), (3, 12, 9, 41)])
def test_channels_last_kernel_with_eleven_outputs_and_mixed_operands(ext, shape):
    """Eleven outputs (the most the channels-last kernel's shared tiles take: one tile a block);
    the second operand per channel (hoisted), full-size contiguous (per element) and channels-last
    too (general strides)."""
    x = rnd(*shape).contiguous(memory_format=torch.channels_last)
    ys = {"channel": rnd(shape[1]).view(-1, 1, 1), "contiguous": rnd(*shape),
          "channels_last": rnd(*shape).contiguous(memory_format=torch.channels_last)}
    for label, y in ys.items():
        outs = poisoned(ext.t_binary, x, y)
        wants = [BINARY_REF[op](x, y) for op in sorted(BINARY_REF)] + [
            x.clamp(-0.25, 0.5), F.leaky_relu(x, 0.1), torch.where(y.expand_as(x) != 0, x, torch.full_like(x, 3.0)),
        ]
        for got, want in zip(outs, wants):
            assert got.is_contiguous()
            torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5, msg=lambda m, label=label: f"{label}: {m}")


def test_empty_and_device_checks(ext):
    assert ext.t_chain_float32(rnd(0, 3), rnd(3)).shape == (0, 3)
    with pytest.raises(RuntimeError, match="dtype"):
        ext.t_chain_float32(rnd(4, dtype=torch.float16), rnd(4))


# ---------------------------------------------------------------- reductions

REF = {
    "sum": lambda v, d, k: v.sum(d, keepdim=k), "mean": lambda v, d, k: v.mean(d, keepdim=k),
    "amax": lambda v, d, k: v.amax(d, keepdim=k), "amin": lambda v, d, k: v.amin(d, keepdim=k),
    "logsumexp": lambda v, d, k: torch.logsumexp(v, d, keepdim=k),
}


@pytest.mark.parametrize("kind", list(REF))
@pytest.mark.parametrize("shape", [(333, 777), (64, 4096), (3, 100_000), (2, 5, 1000), (129, 24),
                                   (3001, 1), (4099, 17), (1025, 64), (333, 200), (65, 512),
                                   # the flat path: one long row (odd: scalar loads), rows in chunks
                                   (1, 2_000_003), (2, 1 << 21), (300, 16_388)])
def test_reduce_last_dim_with_prologue_epilogue(ext, kind, shape):
    x, s, e = rnd(*shape), rnd(shape[-1]), rnd(*shape[:-1])
    got = poisoned(getattr(ext, f"t_{kind}"), x, s, e)
    check(got, REF[kind](x * s, -1, False) + e, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind", list(REF))
@pytest.mark.parametrize("shape", [(8, 300, 33), (2, 50_000, 3), (1, 7, 4096), (16, 64, 8, 8), (4, 16, 5000),
                                   (2, 3, 70_000)])
def test_reduce_inner_dim(ext, kind, shape):
    x = rnd(*shape)
    check(poisoned(getattr(ext, f"t_{kind}_d1"), x), REF[kind](x, 1, True), rtol=1e-4, atol=1e-3)
    # general strides: no column-affine form, the tile kernel's descriptor loads
    xt = x.transpose(0, -1).contiguous().transpose(0, -1)  # same values, first and last dims swapped in memory
    check(poisoned(getattr(ext, f"t_{kind}_d1"), xt), REF[kind](xt, 1, True), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(4096, 1000), (513, 1024), (64, 8192), (7, 12_345), (4, 50_000), (1000, 4),
                                   (4099, 17), (1025, 64), (333, 200), (65, 512), (3001, 1)])
def test_softmax_rows(ext, kind, shape):
    x, b = rnd(*shape), rnd(shape[-1])
    ref = getattr(torch, kind)((x + b) * 0.5, -1)
    check(poisoned(getattr(ext, f"t_{kind}"), x, b), ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(4, 50_000), (7, 12_345), (2, 100_001)])
def test_softmax_long_rows_with_a_per_row_operand(ext, kind, shape):
    """Rows past the row kernels (the tile path's statistics, then the apply kernel) whose
    prologue operand is constant along each row: both passes read it at the row's base (the
    AFFINE tile kernel, the apply kernel's row-chunk form); a per-column operand keeps the
    descriptor forms (test_softmax_rows)."""
    x, b = rnd(*shape), rnd(shape[0], 1)
    ref = getattr(torch, kind)((x + b) * 0.5, -1)
    check(poisoned(getattr(ext, f"t_{kind}"), x, b), ref, rtol=1e-4, atol=1e-6)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132 and shape[1] >= 50_000:
        assert any(f"t_{kind}_apply_rows" in k for k in _kernels_run(getattr(ext, f"t_{kind}"), x, b))


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_softmax_inner_dim(ext, kind):
    for shape in [(4, 64, 16, 16), (2, 3000, 5)]:
        x = rnd(*shape)
        check(poisoned(getattr(ext, f"t_{kind}_d1"), x), getattr(torch, kind)(x, 1), rtol=1e-4, atol=1e-6)


def _kernels_run(fn, *args) -> set[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    return {e.key for e in prof.key_averages()}


# [outer, R, inner] -> the kernel the plan must take on an H100 (132 SMs, 227 KB of shared memory
# per block): thread-block clusters when the column tiles apply, inner is a multiple of 4 (16-byte
# fp32 loads) and R fits 8 CTAs of 256 rows; else shared-memory column tiles when the [R, 16]
# fp32 tile fits and there are >= 132 of them; else the tile kernels.  R <= 16 with inner >= 32:
# a thread per column, its values in registers (colreg), whatever the other paths offer.
STRIDED_SOFTMAX = [((8, 300, 600), "cluster"), ((32, 1024, 160), "cluster"), ((64, 1500, 100), "cluster"),
                   ((40, 2000, 200), "cluster"), ((300, 20, 17), "cols"), ((40, 3000, 64), "cols"),
                   ((40, 4000, 48), "tile"), ((2, 256, 4096), "cluster"), ((4, 64, 256), "tile"),
                   ((8, 16, 1000), "colreg"), ((3, 9, 4097), "colreg"), ((5, 16, 32), "colreg"),
                   ((7, 65, 301), "cols")]


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, path", STRIDED_SOFTMAX, ids=[f"{s}-{p}" for s, p in STRIDED_SOFTMAX])
def test_softmax_strided_dim_column_tiles(ext, kind, shape, path):
    x = rnd(*shape)
    fn = getattr(ext, f"t_{kind}_d1")
    check(poisoned(fn, x), getattr(torch, kind)(x, 1), rtol=1e-4, atol=1e-6)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        kernels = _kernels_run(fn, x)
        assert any(f"t_{kind}_d1_{path}" in k for k in kernels), kernels


# A strided dim with >= 132 x 512 (outer, inner) columns, inner >= 32 and R <= 4096: a thread per
# column walks R (colloop), every kind but the affine ones; R off a multiple of its 8-value chunks.
COLLOOP = [(16, 16, 8192), (3, 13, 30_001), (1, 300, 70_000), (128, 37, 1000), (2, 1, 40_000)]


@pytest.mark.parametrize("kind", list(REF) + ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", COLLOOP, ids=[str(s) for s in COLLOOP])
def test_strided_dim_column_loop(ext, kind, shape):
    x = rnd(*shape)
    fn = getattr(ext, f"t_{kind}_d1")
    want = getattr(torch, kind)(x, 1) if kind in ("softmax", "log_softmax") else REF[kind](x, 1, True)
    # a sum of R unit-variance values has magnitude ~sqrt(R), and so has its rounding noise in
    # another order (an H100 run: one of 70,000 sums over 300 values off by 1.7e-5 where the
    # value had cancelled to 0.066)
    atol = 1e-5 * shape[1] ** 0.5 if kind == "sum" else 1e-5
    check(poisoned(fn, x), want, rtol=1e-4, atol=atol)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:  # softmax kinds, R <= 16: registers
        path = "colreg" if kind in ("softmax", "log_softmax") and shape[1] <= 16 else "colloop"
        assert any(f"t_{kind}_d1_{path}" in k for k in _kernels_run(fn, x))


@pytest.mark.parametrize("shape", [(16, 64, 16_641), (4, 24, 30_001), (8, 128, 1000)])
def test_strided_dim_with_channel_operands(ext, shape):
    """Per-channel operands (a conv bias of shape [C, 1]) read through their descriptors' fast
    division, on the column loop (the first two) and the column tiles."""
    x, b = rnd(*shape), rnd(shape[1], 1)
    e = rnd(shape[0], shape[2])
    check(poisoned(ext.t_softmax_d1_chan, x, b), torch.sigmoid(torch.softmax(x + b, 1)), rtol=1e-4, atol=1e-5)
    check(poisoned(ext.t_logsumexp_d1_chan, x, b, e), torch.logsumexp(x + b, 1) + e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(16, 64, 33, 35), (3, 7, 9, 10), (2, 40, 3, 4, 5), (128, 128, 16, 16)])
def test_reduction_over_the_channels_of_a_channels_last_input(ext, shape):
    """A channels-last input reduced over dim 1 alone is read as rows of [N * S, C] (the
    binding's re-view); the output is the contiguous [N, S...] result; a per-channel prologue
    operand and an epilogue operand over the output keep their meaning."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = rnd(*shape).contiguous(memory_format=fmt)
    for kind in REF:
        got = poisoned(getattr(ext, f"t_{kind}_d1"), x)
        assert got.is_contiguous()
        check(got, REF[kind](x, 1, True), rtol=1e-4, atol=1e-3)
    b = rnd(shape[1]).view(-1, *([1] * (len(shape) - 2)))
    e = rnd(shape[0], *shape[2:])
    check(poisoned(ext.t_logsumexp_d1_chan, x, b, e), torch.logsumexp(x + b, 1) + e, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(16, 128, 64, 64), (3, 40, 7, 9), (2, 33, 1, 70), (8, 16, 128, 128)])
def test_global_pooling_and_all_but_batch_of_a_channels_last_input(ext, shape):
    """Reductions over every spatial dim of a channels-last input read it as [N, S, C] columns
    (the binding's re-view, column kernels built), over all but the batch as rows of S * C; the
    results are the contiguous [N, C] / [N] ones, with a per-channel prologue operand (a conv
    bias) and an epilogue operand over the output keeping their meaning."""
    x = rnd(*shape).contiguous(memory_format=torch.channels_last)
    b, e = rnd(shape[1]).view(-1, 1, 1), rnd(shape[1]).view(-1, 1, 1)
    got = poisoned(ext.t_mean_spatial_chan, x, b, e)
    assert got.shape == (shape[0], shape[1], 1, 1) and got.is_contiguous()
    check(got, (x + b).mean((2, 3), keepdim=True) + e, rtol=1e-4, atol=1e-4)
    check(poisoned(ext.t_sum_but_batch, x), x.sum((1, 2, 3)), rtol=1e-4, atol=1e-2)
    x5 = rnd(shape[0], shape[1], 3, *shape[2:]).contiguous(memory_format=torch.channels_last_3d)
    got5 = poisoned(ext.t_amax_spatial3, x5)
    assert got5.is_contiguous()
    check(got5, x5.amax((2, 3, 4)), rtol=0, atol=0)
    # the same kernels on contiguous inputs (no re-view)
    check(poisoned(ext.t_mean_spatial_chan, x.contiguous(), b, e), (x + b).mean((2, 3), keepdim=True) + e,
          rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(16, 64, 33, 35), (3, 16, 7, 9), (2, 128, 5, 70), (2, 256, 3, 40),
                                   (2, 24, 6, 7, 9), (2, 300, 4, 5), (1, 8, 1, 3), (2, 16, 13, 11),
                                   (2, 16, 4, 8, 9)])
def test_softmax_over_the_channels_of_a_channels_last_input(ext, shape):
    """Softmax kinds over dim 1 of a channels-last input: the NHWC kernel (a block stages
    positions x channels, per-channel prologue and epilogue operands) up to 256 channels, a copy
    to NCHW and the column kernels beyond; the output is the contiguous result."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    x = (rnd(*shape) * 4).contiguous(memory_format=fmt)
    b = rnd(shape[1]).view(-1, *([1] * (len(shape) - 2)))
    got = poisoned(ext.t_softmax_d1_chan, x, b)
    assert got.is_contiguous()
    check(got, torch.sigmoid(torch.softmax(x + b, 1)), rtol=1e-4, atol=1e-5)
    ran = _kernels_run(ext.t_softmax_d1_chan, x, b)
    assert any("t_softmax_d1_chan_softmax_nhwc" in k for k in ran) == (shape[1] <= 256), ran
    e = rnd(shape[1]).view(-1, *([1] * (len(shape) - 2)))  # per-channel epilogue operands, staged once a block
    y = (rnd(*shape) * 4).contiguous(memory_format=fmt).to(torch.bfloat16)
    check(poisoned(ext.t_log_softmax_epi_bf16, y, e, e), (torch.log_softmax(y.float(), 1) * e + e).to(torch.bfloat16),
          rtol=2e-2, atol=2e-2)
    check(poisoned(ext.t_softmax_d1, x), torch.softmax(x, 1), rtol=1e-4, atol=1e-6)
    check(poisoned(ext.t_log_softmax_d1, x), torch.log_softmax(x, 1), rtol=1e-4, atol=1e-4)
    x[0, :, 0] = float("-inf")  # a position whose values are all -inf: NaN, as PyTorch gives
    x[-1, 0, -1] = float("nan")  # a NaN poisons its position
    for kind in ("softmax", "log_softmax"):
        torch.testing.assert_close(poisoned(getattr(ext, f"t_{kind}_d1"), x), getattr(torch, kind)(x, 1),
                                   rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("shape", [(16, 64, 33, 35), (3, 7, 9, 10), (2, 40, 3, 4, 5), (8, 256, 14, 14)])
def test_an_elementwise_step_kept_channels_last_returns_channels_last(ext, shape):
    """keep_channels_last: with every full-size operand channels-last the result is channels-last
    (no transpose), with a per-channel operand in its meaning; contiguous operands give the
    contiguous result, and a mix of layouts the contiguous one (the tiled path)."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    c, tail = shape[1], [1] * (len(shape) - 2)
    x = rnd(*shape).contiguous(memory_format=fmt)
    r = rnd(*shape).contiguous(memory_format=fmt)
    m = rnd(c).view(c, *tail)
    want = torch.relu(x * m + r)
    got = poisoned(ext.t_keep_cl, x, m, r)
    assert got.is_contiguous(memory_format=fmt) and not got.is_contiguous()
    check(got, want)
    got = poisoned(ext.t_keep_cl, x.contiguous(), m, r.contiguous())
    assert got.is_contiguous()
    check(got, want)
    got = poisoned(ext.t_keep_cl, x, m, r.contiguous())
    assert got.is_contiguous()
    check(got, want)


def _gn_conv_ref(x, cb, w, bb, e, groups=8):
    g = torch.nn.functional.gelu(x + cb)
    return torch.nn.functional.group_norm(g, groups, w, bb, eps=1e-5) * e


@pytest.mark.parametrize("shape", [(16, 64, 62, 62), (3, 32, 7, 9), (2, 256, 5, 33), (4, 16, 40, 40),
                                   (2, 96, 1, 70), (2, 64, 6, 7, 9), (2, 264, 4, 4), (3, 16, 5, 7, 11),
                                   (5, 8, 17, 23), (2, 8, 1, 3)])
def test_group_norm_of_a_channels_last_input(ext, shape):
    """group_norm (8 groups) of a channels-last input: the NHWC statistics and apply kernels where
    every other operand is constant along the spatial dims and C <= 256, the output the
    contiguous tensor (16 and 8 channels: a warp over 2 or 4 positions, odd position counts); with
    a full-size epilogue operand, or 264 channels, the binding copies the input to NCHW and the
    channel-span / row kernels run."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    c, tail = shape[1], [1] * (len(shape) - 2)
    x = (rnd(*shape) * 3 + 1).contiguous(memory_format=fmt)
    cb, e = rnd(c).view(c, *tail), rnd(c).view(c, *tail)
    w, bb = rnd(c), rnd(c)
    got = poisoned(ext.t_gn_conv, x, cb, w, bb, e)
    assert got.is_contiguous()
    check(got, _gn_conv_ref(x, cb, w, bb, e), rtol=1e-4, atol=1e-4)
    ran = _kernels_run(ext.t_gn_conv, x, cb, w, bb, e)
    assert any("t_gn_conv_gn_nhwc_apply" in k for k in ran) == (c <= 256), ran
    full = rnd(*shape)  # a full-size epilogue operand: the copy
    check(poisoned(ext.t_gn_conv, x, cb, w, bb, full), _gn_conv_ref(x, cb, w, bb, full), rtol=1e-4, atol=1e-4)
    check(poisoned(ext.t_gn_conv, x.contiguous(), cb, w, bb, e), _gn_conv_ref(x, cb, w, bb, e), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(2, 16, 9, 80), (3, 32, 70, 3)])
def test_group_norm_spans_read_a_transposed_full_size_operand(ext, shape):
    """A full-size epilogue operand given as a transposed view (general strides): the row kernels
    refuse it, the channel-span kernels (spans >= 64 values) read it per value; their per-channel
    base divided by the descriptor's 0 divisor before (2026-12-07, found reading the code)."""
    c, tail = shape[1], [1] * (len(shape) - 2)
    x = rnd(*shape) * 3 + 1
    cb, w, bb = rnd(c).view(c, *tail), rnd(c), rnd(c)
    e = rnd(*shape[:2], shape[3], shape[2]).transpose(2, 3)  # logical `shape`, W-major in memory
    check(poisoned(ext.t_gn_conv, x, cb, w, bb, e), _gn_conv_ref(x, cb, w, bb, e), rtol=1e-4, atol=1e-4)
    ran = _kernels_run(ext.t_gn_conv, x, cb, w, bb, e)
    assert any("t_gn_conv_gn_apply" in k for k in ran), ran


@pytest.mark.parametrize("shape", [(16, 64, 62, 62), (3, 32, 7, 9), (2, 64, 6, 7, 9), (2, 264, 4, 4),
                                   (3, 16, 5, 7, 11), (5, 8, 17, 23)])
def test_group_norm_kept_channels_last(ext, shape):
    """keep_channels_last: the NHWC kernels store the output channels-last where they run; an
    NCHW input, a full-size operand or 264 channels take the other kernels and the binding
    copies their contiguous result to channels-last: the same values every way."""
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    c, tail = shape[1], [1] * (len(shape) - 2)
    x = (rnd(*shape) * 3 + 1).contiguous(memory_format=fmt)
    cb, e = rnd(c).view(c, *tail), rnd(c).view(c, *tail)
    w, bb = rnd(c), rnd(c)
    for xin, ein in ((x, e), (x.contiguous(), e), (x, rnd(*shape))):
        got = poisoned(ext.t_gn_conv_keep, xin, cb, w, bb, ein)
        assert got.is_contiguous(memory_format=fmt), got.stride()
        check(got, _gn_conv_ref(x, cb, w, bb, ein), rtol=1e-4, atol=1e-4)
    ran = _kernels_run(ext.t_gn_conv_keep, x, cb, w, bb, e)
    # (the build may share a kernel body under t_gn_conv's name: match the instantiation)
    assert any("gn_nhwc_apply<4, true" in k for k in ran) == (c <= 256), ran
    assert not any("copy" in k.lower() or "elementwise_kernel" in k for k in ran) or c > 256, ran


@pytest.mark.parametrize("kind", ["softmax", "log_softmax", "logsumexp", "amax"])
def test_strided_dim_column_loop_nan_and_inf(ext, kind):
    """The 8-value chunks keep PyTorch's special values: NaN poisons its column, an all -inf
    column is NaN (softmax) or -inf (logsumexp), +inf gives logsumexp +inf."""
    x = rnd(8, 20, 10_000)
    x[0, 5, 3] = float("nan")
    x[1, :, 7] = float("-inf")
    x[2, 4, 9] = float("-inf")
    x[3, 11, 11] = float("inf")
    fn = getattr(ext, f"t_{kind}_d1")
    want = getattr(torch, kind)(x, 1) if kind in ("softmax", "log_softmax") else REF[kind](x, 1, True)
    torch.testing.assert_close(poisoned(fn, x), want, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("kind", ["softmax", "log_softmax"])
def test_softmax_strided_dim_nan_and_inf_columns(ext, kind):
    """The cluster kernel's fast math keeps PyTorch's special values: a NaN or +inf poisons its
    column, an all -inf column is NaN, a single -inf is an ordinary zero weight."""
    x = rnd(8, 300, 600)
    x[0, 5, 3] = float("nan")
    x[1, :, 7] = float("-inf")
    x[2, 4, 9] = float("-inf")
    x[3, 8, 11] = float("inf")
    got = poisoned(getattr(ext, f"t_{kind}_d1"), x)
    torch.testing.assert_close(got, getattr(torch, kind)(x, 1), rtol=1e-4, atol=1e-6, equal_nan=True)
    assert torch.isnan(got[0, :, 3]).all() and not torch.isnan(got[0, :, 4]).any()


def test_softmax_strided_dim_fp16_prologue_epilogue(ext):
    x, e = rnd(16, 512, 300, dtype=torch.float16), rnd(16, 512, 300, dtype=torch.float16)
    want = (torch.softmax(x.float() * 0.5, 1) * e.float()).half()
    got = poisoned(ext.t_softmax_d1_f16, x, e)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-3, atol=2e-3)
    x2 = rnd(16, 512, 600, dtype=torch.float16)[:, :, ::2]  # strided input: generic loads
    e2 = rnd(16, 512, 300, dtype=torch.float16)
    want = (torch.softmax(x2.float() * 0.5, 1) * e2.float()).half()
    torch.testing.assert_close(poisoned(ext.t_softmax_d1_f16, x2, e2).float(), want.float(), rtol=2e-3, atol=2e-3)
    x3, e3 = rnd(16, 700, 320, dtype=torch.float16), rnd(16, 700, 320, dtype=torch.float16)  # inner % 8 == 0
    want = (torch.softmax(x3.float() * 0.5, 1) * e3.float()).half()
    torch.testing.assert_close(poisoned(ext.t_softmax_d1_f16, x3, e3).float(), want.float(), rtol=2e-3, atol=2e-3)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert any("t_softmax_d1_f16_cluster" in k for k in _kernels_run(ext.t_softmax_d1_f16, x3, e3))


@pytest.mark.parametrize("d", list(TORCH_DT))
@pytest.mark.parametrize("shape", [(512, 768), (1000, 1023), (33, 4096), (8, 20_000), (4099, 64), (100, 200)])
def test_softmax_and_layer_norm_dtypes(ext, d, shape):
    dt = TORCH_DT[d]
    x = rnd(*shape, dtype=dt)
    check(poisoned(getattr(ext, f"t_softmax_{d}"), x), torch.softmax(x.float(), -1).to(dt), atol=1e-5 if d == "float32" else None)
    w, b = rnd(shape[-1], dtype=dt), rnd(shape[-1], dtype=dt)
    ref = torch.relu(F.layer_norm(x.float(), (shape[-1],), w.float(), b.float(), 1e-5)).to(dt)
    got = poisoned(getattr(ext, f"t_ln_{d}"), x, w, b)
    rtol, atol = TOL[dt]
    torch.testing.assert_close(got.float(), ref.float(), rtol=rtol, atol=max(atol, 1e-4))


def test_layer_norm_two_dims_and_misaligned(ext):
    x = rnd(6, 32, 48) * 3 + 1
    check(poisoned(ext.t_ln2, x), F.layer_norm(x, (32, 48), eps=1e-6), rtol=1e-4, atol=1e-4)
    base = rnd(2 * 4096 + 1)
    xm = base[1:].view(2, 4096)  # misaligned rows: scalar row kernel
    w, b = rnd(4096), rnd(4096)
    check(poisoned(ext.t_ln_float32, xm, w, b), torch.relu(F.layer_norm(xm, (4096,), w, b)), rtol=1e-4, atol=1e-4)


def test_sum_bf16_dim0(ext):
    x = rnd(3000, 70, dtype=torch.bfloat16)
    got = poisoned(ext.t_sum_bf16, x)
    torch.testing.assert_close(got, x.float().sum(0), rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- GEMM


def test_gemm_epilogues(ext):
    torch.backends.cuda.matmul.allow_tf32 = False
    x, w, b = rnd(3, 77, 96), rnd(130, 96), rnd(130)
    check(poisoned(ext.t_gemm_relu, x, w, b), torch.relu(F.linear(x, w, b)), rtol=1e-4, atol=1e-4)
    xh, wh, bh = rnd(200, 64, dtype=torch.float16), rnd(48, 64, dtype=torch.float16), rnd(48, dtype=torch.float16)
    ref = F.gelu(F.linear(xh.float(), wh.float(), bh.float()), approximate="tanh").half()
    torch.testing.assert_close(poisoned(ext.t_gemm_gelu_tanh, xh, wh, bh).float(), ref.float(), rtol=1e-2, atol=1e-2)
    xb, wb, bb = rnd(5, 33, 64, dtype=torch.bfloat16), rnd(40, 64, dtype=torch.bfloat16), rnd(40, dtype=torch.bfloat16)
    ref = F.gelu(F.linear(xb.float(), wb.float(), bb.float())).bfloat16()
    torch.testing.assert_close(poisoned(ext.t_gemm_gelu_bf16, xb, wb, bb).float(), ref.float(), rtol=3e-2, atol=3e-2)
    xk, wk = rnd(65, 31), rnd(31, 17)
    check(poisoned(ext.t_gemm_plain_kn, xk, wk), xk @ wk, rtol=1e-4, atol=1e-4)
    assert math.isfinite(float(ext.t_gemm_plain_kn(xk.t().contiguous().t(), wk).sum()))


def test_reduction_argument_errors(ext):  # last: a crash here cannot hide other results
    with pytest.raises(RuntimeError, match="out of range"):
        ext.t_sum_d1(rnd(5))
    with pytest.raises(RuntimeError, match="dtype"):
        ext.t_softmax_float32(rnd(4, 4, dtype=torch.float16))
