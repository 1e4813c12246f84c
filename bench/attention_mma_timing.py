"""The attention kernel's two bodies against PyTorch's attention, kernel alone (H100): for a few
shapes (batch x heads, length, head dim, causal) the GPU time of 5 back-to-back calls after a
warm-up and the rate in TFLOP/s (4 L^2 D a head, half of it causal):

- ours: strict fp32 (FMA units), fp32 inputs under tf32 / bf16 opt-in, f16 and bf16 inputs
  (tensor cores, mma.sync);
- PyTorch: scaled_dot_product_attention in fp32 (its default backend) and in f16 / bf16 (flash),
  and the written-out softmax(q k^T s) v with TF32 matmuls allowed (what eager runs under tf32).

Also an ncu target.  Run from the repository root on a GPU machine; prints one markdown table."""

import math
import sys
from dataclasses import replace

sys.path.insert(0, "tests")

import torch  # noqa: E402
from kernelstitch.agents.coder.codegen import attention  # noqa: E402
from kernelstitch.agents.plan.kernel_spec import AttentionSpec, TensorArg  # noqa: E402
from test_codegen_gpu import load_kernels  # noqa: E402

from kernelstitch.core.cuda_timing import CudaTimer  # noqa: E402

SHAPES = [  # (name, batch, heads, length, head dim, causal)
    ("gpt_1024_d64_causal", 16, 12, 1024, 64, True),
    ("vit_4096_d64", 8, 12, 4096, 64, False),
    ("vision_16384_d32", 8, 4, 16384, 32, False),
    ("llm_2048_d128_causal", 4, 16, 2048, 128, True),
    ("d256_2048", 2, 8, 2048, 256, False),
]
VARIANTS = [  # (label, input dtype, precision)
    ("ours fp32", "float32", "fp32"), ("ours tf32", "float32", "tf32"), ("ours fp32-in bf16", "float32", "bf16"),
    ("ours f16", "float16", "fp32"), ("ours bf16", "bfloat16", "fp32"),
]
DT = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def spec_name(shape: str, label: str) -> str:
    return f"t_{shape}_{label.replace(' ', '_').replace('-', '_')}"


def main() -> None:
    specs = []
    for shape, _, _, _, d, causal in SHAPES:
        for label, dtype, precision in VARIANTS:
            if dtype == "float32" and precision == "fp32" and d > 128:
                continue  # the FMA kernel stops at 128
            t = TensorArg("q", dtype)
            specs.append(AttentionSpec(spec_name(shape, label), t, t, t, d, 1 / math.sqrt(d), dtype, causal,
                                       precision=precision))
    ext = load_kernels("ks_attention_mma_timing", specs)
    # the tensor-core body with one m16 row tile a warp where the default takes two
    one_tile = [replace(s, name=s.name + "_mt1") for s in specs
                if attention.row_tiles(s.head_dim, s.causal or s.mask is not None) == 2
                and attention.mma_kind(s.query.dtype, s.precision) is not None
                and s.precision in ("fp32", "tf32") and s.query.dtype in ("float32", "bfloat16")]
    default_tiles = attention.row_tiles
    attention.row_tiles = lambda head_dim, masked=False: 1
    try:
        ext_one = load_kernels("ks_attention_mma_timing_mt1", one_tile)
    finally:
        attention.row_tiles = default_tiles
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| shape | variant | ms | TFLOP/s |\n|---|---|---|---|")
    for shape in SHAPES:
        time_shape(ext, {s.name for s in specs}, *shape, ext_one=ext_one, one_names={s.name for s in one_tile})


def time_shape(ext, names: set[str], shape: str, b: int, h: int, length: int, d: int, causal: bool,
               ext_one=None, one_names: frozenset[str] | set[str] = frozenset()) -> None:
    """[b, h, L, d] operands (4-D: PyTorch's fused kernels take no other rank)."""
    timer = CudaTimer()
    n = b * h
    flops = 4 * n * length * length * d / (2 if causal else 1)
    torch.manual_seed(0)
    base = [torch.randn(b, h, length, d, device="cuda") for _ in range(3)]

    def row(label, call):
        call()
        timer.synchronize()
        ms = timer.span(call, repeat=5).gpu_ms
        print(f"| {shape} | {label} | {ms:.3f} | {flops / ms / 1e9:.1f} |", flush=True)
        torch.cuda.empty_cache()

    for label, dtype, _ in VARIANTS:
        name = spec_name(shape, label)
        if name in names:
            q, k, v = (x.to(DT[dtype]) for x in base)
            row(label, lambda fn=getattr(ext, name), q=q, k=k, v=v: fn(q, k, v))
            if name + "_mt1" in one_names:
                row(label + " (1 row tile a warp)", lambda fn=getattr(ext_one, name + "_mt1"), q=q, k=k, v=v: fn(q, k, v))
    for dtype in ("float32", "float16", "bfloat16"):
        q, k, v = (x.to(DT[dtype]) for x in base)
        row(f"torch sdpa {dtype}", lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=causal))
    if n * length * length * 4 <= 4 << 30:  # the written-out scores fit in memory
        q, k, v = base
        mask = torch.ones(length, length, device="cuda", dtype=torch.bool).tril() if causal else None

        def written_out():
            s = q @ k.transpose(-2, -1) / math.sqrt(d)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return s.softmax(-1) @ v

        torch.backends.cuda.matmul.allow_tf32 = True
        row("torch written-out tf32", written_out)
        torch.backends.cuda.matmul.allow_tf32 = False

if __name__ == "__main__":
    main()
