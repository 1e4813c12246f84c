"""Flash-attention emitter: scaled_dot_product_attention (no dropout) as one kernel that streams
key / value tiles through shared memory with an online softmax, so the [Lq, Lk] scores are never
stored (cuda/attention/).  Two bodies share one launcher (launch.cu): simt.cu, fp32 on the FMA
units (strict fp32), and mma.cu, the products on tensor cores (mma.sync) in tf32, f16 or bf16 for
16-bit inputs and for fp32 inputs under the user's precision opt-in; both take their parameter
list from kernel_params.cu.  Python picks the body and its tile (rows_per_thread for simt.cu;
block_keys and row_tiles for mma.cu)."""

from __future__ import annotations

import math

from kernelstitch.agents.coder.codegen.common import CUDA_TYPE, TORCH_DTYPE, check_identifier
from kernelstitch.agents.coder.codegen.expr import c_float
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.templates import render
from kernelstitch.agents.plan.kernel_spec import (
    AttentionSpec,
    attention_kernel_problem,
    attention_uses_tensor_cores,
)

MASK_KINDS = {None: 0, "bool": 1}  # any float dtype: 2 (added to the scores)
# mma.cu's KIND: the tensor-core math of the products
MMA_KINDS = {"tf32": 0, "fp16": 1, "bf16": 2}
MMA_MATH = {0: "tf32 (mma.sync m16n8k8)", 1: "f16 (mma.sync m16n8k16)", 2: "bf16 (mma.sync m16n8k16)"}


def rows_per_thread(head_dim: int, additive_mask: bool = False) -> int:
    """Query rows a thread: 8 where ptxas keeps RM x (scores 4 + head dims a thread) within 128
    registers without spilling (head dims a thread 1, 2 or 4: head dim <= 32 or 49..64), else 4
    (head dim 48 spilled at 8 rows; so did head dims 24-64 with an additive mask, 4-52 bytes)."""
    return 8 if -(-head_dim // 16) in (1, 2, 4) and not additive_mask else 4


def mma_kind(dtype: str, precision: str) -> int | None:
    """mma.cu's math for inputs of `dtype` under `precision`; None: the fp32 FMA-unit kernel.
    16-bit inputs keep their own math (a precision opt-in never widens them)."""
    if not attention_uses_tensor_cores(dtype, precision):
        return None
    if dtype == "float16":
        return MMA_KINDS["fp16"]
    if dtype == "bfloat16":
        return MMA_KINDS["bf16"]
    return MMA_KINDS[precision]


def block_keys(head_dim: int) -> int:
    """Keys a tile of the tensor-core kernel: 64, or 32 above head dim 128 (a lane's output
    accumulators grow with the head dim; the scores' shrink with the tile)."""
    return 64 if head_dim <= 128 else 32


def row_tiles(head_dim: int, masked: bool = False) -> int:
    """m16 row tiles a warp of the tensor-core kernel.  Two halve the shared-memory reads per
    product (each K / V fragment feeds both) but double the score and output registers: on an
    H100 (bench/results/2026-11-27-h100-attention-mma/RUN.md) two won at head dim 32 unmasked
    (+17% tf32, +4% bf16), were mixed at 64 (-5% to +8%; -20% bf16 causal) and cost a causal /
    masked GPT block 11% (233 registers with a mask: 2 blocks an SM).  So: 2 at head dims <= 32
    without a mask or causal limit, else 1."""
    return 2 if head_dim <= 32 and not masked else 1


def emit_attention(spec: AttentionSpec) -> KernelSource:
    name = check_identifier(spec.name)
    mask_dtype = spec.mask.dtype if spec.mask is not None else None
    problem = attention_kernel_problem(spec.head_dim, (spec.query.dtype, spec.key.dtype, spec.value.dtype), mask_dtype,
                                       spec.precision)
    if problem:
        raise ValueError(f"{name}: {problem}")
    if spec.score not in ("softmax", "relu"):
        raise ValueError(f"{name}: unknown score function {spec.score!r}")
    if spec.mask_nonzero and spec.mask is None:
        raise ValueError(f"{name}: mask_nonzero without a mask")
    launcher_sig = (f"void {name}_launch(const void* q, const void* k, const void* v, const void* mask, void* out, "
                    "int64_t N, int64_t heads, int64_t Lq, int64_t Lk, int64_t sqb, int64_t sqh, int64_t sq1, "
                    "int64_t skb, int64_t skh, int64_t sk1, int64_t svb, int64_t svh, int64_t sv1, int64_t sm0, "
                    "int64_t sm1, int64_t sm2, void* live, cudaStream_t stream)")
    live_sig = f"int64_t {name}_live_bytes(int64_t mask_n, int64_t Lq, int64_t Lk)"
    mask_kind = 1 if spec.mask_nonzero else MASK_KINDS.get(mask_dtype, 2)
    kind = mma_kind(spec.query.dtype, spec.precision)
    types = dict(q_t=CUDA_TYPE[spec.query.dtype], k_t=CUDA_TYPE[spec.key.dtype], v_t=CUDA_TYPE[spec.value.dtype],
                 mask_t=CUDA_TYPE[mask_dtype or "float32"], out_t=CUDA_TYPE[spec.out_dtype])
    # the kernel's parameter list (kernel_params.cu), spliced into either body: launch.cu calls both alike
    kernel_params = render("attention/kernel_params.cu", **types).strip()
    body = dict(
        kernel_params=kernel_params, name=name, head_dim=spec.head_dim, head_dim_pad=-(-spec.head_dim // 16) * 16,
        causal="true" if spec.causal else "false", mask_kind=mask_kind,
        mask_what=("" if mask_dtype is None else " + mask" if mask_kind == 2 else
                   ", masked where the mask is 0" if spec.mask_nonzero else ", masked"),
        causal_what=", causal" if spec.causal else "",
        relu="true" if spec.score == "relu" else "false", score=spec.score, out_t=types["out_t"])
    # the body, its key tile and how it lays out the work (the kernel's notes)
    if kind is None:
        rm = rows_per_thread(spec.head_dim, additive_mask=mask_kind == 2)
        cuda = render("attention/simt.cu", rows_per_thread=rm, **body)
        keys = 64
        layout = f"{16 * rm} query rows a block of 256 threads, fp32 accumulation (no tensor cores: strict fp32)"
    else:
        tiles = row_tiles(spec.head_dim, masked=spec.causal or spec.mask is not None)
        keys = block_keys(spec.head_dim)
        cuda = render("attention/mma.cu", mma_kind=kind, math=MMA_MATH[kind], q_t=types["q_t"],
                      block_keys=keys, row_tiles=tiles, **body)
        layout = (f"{64 * tiles} query rows a block of 4 warps, products on tensor cores in {MMA_MATH[kind]}, "
                  "fp32 accumulation and softmax")
    # softmax scores in base 2 (exp2); ReLU scores as they are
    cuda += "\n\n" + render(
        "attention/launch.cu", name=name, launcher_sig=launcher_sig,
        q_scale=c_float(spec.scale * (1.0 if spec.score == "relu" else math.log2(math.e))), **types)
    cparams = "at::Tensor q, at::Tensor k, at::Tensor v" + (", at::Tensor mask" if spec.mask is not None else "")
    mask_setup = (render("attention/mask.cpp", name=name, mask_name=spec.mask.name,
                         mask_dtype=TORCH_DTYPE[spec.mask.dtype])
                  if spec.mask is not None else render("attention/no_mask.cpp"))
    binding = render(
        "attention/binding.cpp", name=name, cparams=cparams, head_dim=spec.head_dim,
        split_heads="false" if kind is None else "true",
        q_name=spec.query.name, k_name=spec.key.name, v_name=spec.value.name,
        q_dtype=TORCH_DTYPE[spec.query.dtype], k_dtype=TORCH_DTYPE[spec.key.dtype],
        v_dtype=TORCH_DTYPE[spec.value.dtype], out_dtype=TORCH_DTYPE[spec.out_dtype], mask_setup=mask_setup)
    args = (spec.query.name, spec.key.name, spec.value.name) + ((spec.mask.name,) if spec.mask else ())
    what = "causal " if spec.causal else ("masked " if spec.mask is not None else "")
    how = "online softmax in base 2" if spec.score == "softmax" else "relu(scores) accumulated as they come"
    return KernelSource(
        function=name, cuda=cuda, binding=binding, launcher_decl=f"{launcher_sig};\n{live_sig};", python_args=args,
        notes=(f"{what}flash attention, head dim {spec.head_dim}: key / value tiles of {keys} streamed through "
               f"shared memory, {how}, the [Lq, Lk] scores never stored",
               layout + (", key tiles past the block's last query skipped" if spec.causal else "")
               + (", tiles where the mask lets no key take part skipped (a pre-pass marks them)"
                  if mask_kind == 1 else "")),
    )
