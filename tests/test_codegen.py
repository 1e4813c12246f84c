"""Kernel emitters: pure-Python behaviour, and every emitted `cuda` text compiled with nvcc for
sm_90a with no register spills (batched into two .cu files compiled in parallel)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from kernelstitch.agents.coder.codegen import (
    BINDING_PRELUDE,
    CUDA_PRELUDE,
    ArgReduceSpec,
    AttentionSpec,
    BatchStatsMergeSpec,
    BatchStatsSpec,
    CatSegment,
    CatSpec,
    ContractionSpec,
    ConvTapMeansSpec,
    ElementwiseOp,
    ElementwiseSpec,
    GemmSpec,
    NllLossSpec,
    PoolSpec,
    RecurrentSpec,
    ReductionSpec,
    ScanSpec,
    TensorArg,
    TriangleSpec,
    build_extension_sources,
    c_float,
    compile_ops,
    emit,
    emit_elementwise,
    emit_gemm,
    emit_reduction,
)
from kernelstitch.agents.coder.codegen.common import renamed_kernel
from kernelstitch.agents.coder.codegen.conv_split import emit_split_cat
from kernelstitch.agents.coder.codegen.layout_swap import emit_layout_swap
from kernelstitch.agents.plan.kernel_spec import (
    ATTR_OPS,
    BINARY_OPS,
    UNARY_OPS,
    spec_from_json,
    spec_to_json,
)
from spill_scope import REPRESENTATIVE_REDUCTIONS, full_spill_check, nvcc_report

from kernelstitch.bench.preflight import cuda_include, host_include_flags

E = ElementwiseOp
DTYPES = ("float32", "float16", "bfloat16")


def chain_spec(name: str, dtype: str, out_dtype: str | None = None) -> ElementwiseSpec:
    """A 4-op chain with a broadcast operand: y = tanh(gelu(x + b) * 2)."""
    return ElementwiseSpec(
        name,
        (TensorArg("x", dtype), TensorArg("b", dtype)),
        (E("add", ("x", "b"), "t0"), E("gelu", ("t0",), "t1"), E("mul", ("t1", 2.0), "t2"), E("tanh", ("t2",), "y")),
        ("y",),
        out_dtype or dtype,
    )


def all_unary_spec(name: str, dtype: str) -> ElementwiseSpec:
    ops = tuple(E(op, ("x",), f"u_{op}") for op in sorted(UNARY_OPS))
    return ElementwiseSpec(name, (TensorArg("x", dtype),), ops, tuple(o.out for o in ops), dtype)


def binary_attr_spec(name: str, dtype: str) -> ElementwiseSpec:
    ops = tuple(E(op, ("x", "y"), f"b_{op}") for op in sorted(BINARY_OPS)) + (
        E("clamp", ("x",), "c1", (("max", 0.5), ("min", -0.25))),
        E("clamp", ("x",), "c2", (("max", None), ("min", 0.0))),
        E("leaky_relu", ("x",), "lr", (("negative_slope", 0.1),)),
        E("where", ("x", "y", 3.0), "wh"),
    )
    return ElementwiseSpec(
        name, (TensorArg("x", dtype), TensorArg("y", dtype)), ops, tuple(o.out for o in ops), dtype
    )


def reduction_specs() -> list[ReductionSpec]:
    specs = []
    for kind in ("sum", "mean", "amax", "amin", "logsumexp"):
        specs.append(
            ReductionSpec(
                f"red_{kind}", kind, (TensorArg("x", "float32"), TensorArg("s", "float32"), TensorArg("e", "float32")),
                dim=-1, keepdim=False, out_dtype="float32",
                prologue=(E("mul", ("x", "s"), "p"),), prologue_out="p",
                epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",),
                trailing=True,  # as the planner marks a last-dim reduction: no column kernels
            )
        )
    # global pooling built with its column kernels: the channels-last [N, S, C] view's binding
    specs.append(ReductionSpec(
        "red_mean_spatial", "mean", (TensorArg("x", "float32"), TensorArg("b", "float32"), TensorArg("e", "float32")),
        dim=2, dim_count=2, keepdim=True, out_dtype="float32", prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
        epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    for kind in ("softmax", "log_softmax"):
        specs.append(
            ReductionSpec(
                f"red_{kind}", kind, (TensorArg("x", "float32"), TensorArg("b", "float32")), dim=1, keepdim=False,
                out_dtype="float32", prologue=(E("add", ("x", "b"), "p"), E("mul", ("p", 0.125), "q")), prologue_out="q",
            )
        )
    specs.append(
        ReductionSpec(
            "red_layer_norm", "layer_norm", (TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("bb", "float32")),
            dim=-1, keepdim=False, out_dtype="float32", weight="w", bias="bb",
            epilogue=(E("gelu", ("acc",), "g"),), epilogue_out="g", trailing=True,
        )
    )
    for dtype in ("float16", "bfloat16"):
        specs.append(ReductionSpec(f"red_softmax_{dtype}", "softmax", (TensorArg("x", dtype),), -1, False, dtype))
        specs.append(
            ReductionSpec(
                f"red_ln_{dtype}", "layer_norm", (TensorArg("x", dtype), TensorArg("w", dtype), TensorArg("bb", dtype)),
                -1, False, dtype, weight="w", bias="bb", norm_ndim=2, trailing=True,
            )
        )
        specs.append(ReductionSpec(f"red_sum_{dtype}", "sum", (TensorArg("x", dtype),), 0, True, "float32"))
    # group_norm: a conv bias in the prologue and a per-channel affine inside each row (loaded per
    # VEC values, not per row), an epilogue input; a mean over three consecutive dims
    specs.append(
        ReductionSpec(
            "red_group_norm", "group_norm",
            (TensorArg("x", "float32"), TensorArg("cb", "float32"), TensorArg("w", "float32"),
             TensorArg("bb", "float32"), TensorArg("r", "float32")),
            dim=1, keepdim=True, out_dtype="float32", weight="w", bias="bb", groups=8,
            prologue=(E("add", ("x", "cb"), "p"),), prologue_out="p",
            epilogue=(E("tanh", ("acc",), "t"), E("add", ("t", "r"), "o")), epilogue_out="o",
            epilogue_inputs=("r",), trailing=True,
        )
    )
    specs.append(ReductionSpec("red_group_norm_f16", "group_norm", (TensorArg("x", "float16"),), 1, True,
                               "float16", groups=4, trailing=True))
    specs.append(ReductionSpec("red_mean_dims", "mean", (TensorArg("x", "float32"),), 1, False, "float32",
                               dim_count=3))
    return specs


def elementwise_specs() -> list[ElementwiseSpec]:
    specs = [chain_spec(f"ew_chain_{d}", d) for d in DTYPES]
    specs += [all_unary_spec("ew_unary_f32", "float32"), binary_attr_spec("ew_binary_f32", "float32")]
    specs.append(chain_spec("ew_mixed", "float32", out_dtype="bfloat16"))
    specs.append(
        ElementwiseSpec(
            "ew_mixed_in", (TensorArg("x", "float32"), TensorArg("h", "float16")),
            (E("mul", ("x", "h"), "m"), E("silu", ("m",), "s")), ("m", "s"), "float16",
        )
    )
    # kept channels-last (agents/coder/layout.py): the binding's permuted path (before the last,
    # which test_binding_contract reads)
    specs.insert(-1, replace(specs[0], name="ew_keep_cl", keep_channels_last=True))
    return specs


def pool_specs() -> list[PoolSpec]:
    """One spec per pooling kind and dtype, with every operand role: a full-size operand read at
    every window tap, a per-channel plane operand, an epilogue operand."""
    x, b, y, e = (TensorArg(n, "float32") for n in ("x", "b", "y", "e"))
    return [
        PoolSpec("pool_max3d", "max", (x, b, y, e), 3, "float32", kernel=(2, 3, 2), stride=(2, 2, 1),
                 padding=(1, 1, 0), dilation=(1, 2, 1), ceil_mode=True,
                 prologue=(E("add", ("x", "b"), "t1"), E("mul", ("t1", "y"), "t2"), E("relu", ("t2",), "t3")),
                 prologue_out="t3", epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o",
                 epilogue_inputs=("e",), plane_inputs=("b",)),
        PoolSpec("pool_avg2d_f16", "avg", (TensorArg("x", "float16"),), 2, "float16", kernel=(3, 3),
                 stride=(2, 2), padding=(1, 1), dilation=(1, 1), ceil_mode=True, count_include_pad=False,
                 epilogue=(E("sigmoid", ("acc",), "s"),), epilogue_out="s"),
        PoolSpec("pool_avg1d_div", "avg", (TensorArg("x", "float32"),), 1, "float32", kernel=(4,),
                 stride=(3,), padding=(2,), dilation=(1,), divisor=3),
        PoolSpec("pool_adaptive_bf16", "adaptive_avg", (TensorArg("x", "bfloat16"),), 2, "bfloat16",
                 output_size=(5, 7)),
        # kept channels-last: the output stored in a channels-last input's memory order
        PoolSpec("pool_max2d_cl", "max", (x, b), 2, "float32", kernel=(3, 3), stride=(2, 2), padding=(1, 1),
                 dilation=(1, 1), prologue=(E("add", ("x", "b"), "t1"), E("relu", ("t1",), "t2")),
                 prologue_out="t2", plane_inputs=("b",), keep_channels_last=True),
        # a channels-last input pooled into a contiguous output (the tiled 4-channel kernel) with a
        # plane operand in the prologue and an epilogue operand
        PoolSpec("pool_avg2d_to_nchw", "avg", (x, b, e), 2, "float32", kernel=(2, 2), stride=(2, 2),
                 padding=(0, 0), dilation=(1, 1), prologue=(E("add", ("x", "b"), "t1"), E("tanh", ("t1",), "t2")),
                 prologue_out="t2", epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o",
                 epilogue_inputs=("e",), plane_inputs=("b",)),
        # level2/72's 4x4x4 average after its conv bias and batch_norm apply (five plane operands,
        # as its plan has them): a window of 64 taps, past the 4-channel kernels' unrolled bound
        PoolSpec("pool_avg3d_4x4x4", "avg", tuple(TensorArg(n, "float32") for n in ("x", "cb", "m", "r", "w", "bb")),
                 3, "float32", kernel=(4, 4, 4), stride=(4, 4, 4), padding=(0, 0, 0), dilation=(1, 1, 1),
                 prologue=(E("add", ("x", "cb"), "t1"), E("sub", ("t1", "m"), "t2"), E("mul", ("t2", "r"), "t3"),
                           E("mul", ("t3", "w"), "t4"), E("add", ("t4", "bb"), "t5")),
                 prologue_out="t5", plane_inputs=("cb", "m", "r", "w", "bb")),
    ]


def scan_specs() -> list[ScanSpec]:
    """Cumulative sum / product: plain, with a prologue and a broadcast operand, reversed, 16-bit
    storage (fp32 accumulation), exclusive (forward, and reversed over a strided dim)."""
    x, m = TensorArg("x", "float32"), TensorArg("m", "float32")
    return [
        ScanSpec("scan_sum", "sum", (x,), 1, "float32"),
        ScanSpec("scan_masked", "sum", (x, m), -1, "float32", (E("mul", ("x", "m"), "p"),), "p"),
        ScanSpec("scan_prod_rev", "prod", (x,), 0, "float32", reverse=True),
        ScanSpec("scan_sum_rev_f16", "sum", (TensorArg("x", "float16"),), -1, "float16", reverse=True),
        ScanSpec("scan_sum_bf16", "sum", (TensorArg("x", "bfloat16"),), 1, "bfloat16"),
        ScanSpec("scan_sum_excl", "sum", (x,), 1, "float32", exclusive=True),
        ScanSpec("scan_prod_rev_excl", "prod", (x,), 0, "float32", reverse=True, exclusive=True),
    ]


def arg_reduce_specs() -> list[ArgReduceSpec]:
    """argmax / argmin: a middle dim (thread per column), the contiguous dim with a prologue and
    a broadcast operand (block per row), every element, 16-bit storage with keepdim."""
    x, m = TensorArg("x", "float32"), TensorArg("m", "float32")
    return [
        ArgReduceSpec("arg_max_dim1", "argmax", (x,), 1),
        ArgReduceSpec("arg_min_rows", "argmin", (x, m), -1, False, (E("mul", ("x", "m"), "p"),), "p"),
        ArgReduceSpec("arg_max_all", "argmax", (x,), None),
        ArgReduceSpec("arg_min_f16_keep", "argmin", (TensorArg("x", "float16"),), -1, True),
    ]


def triangle_specs() -> list[TriangleSpec]:
    """triu / tril: plain, a negative and a positive diagonal with a prologue and a broadcast
    operand, 16-bit storage."""
    x, m = TensorArg("x", "float32"), TensorArg("m", "float32")
    return [
        TriangleSpec("tri_upper", "triu", (x,), 0, "float32"),
        TriangleSpec("tri_lower_scaled", "tril", (x, m), -1, "float32", (E("mul", ("x", "m"), "p"),), "p"),
        TriangleSpec("tri_upper_k2_bf16", "triu", (TensorArg("x", "bfloat16"),), 2, "bfloat16"),
    ]


def nll_specs() -> list[NllLossSpec]:
    """cross_entropy's negative log-likelihood: mean (fp32), sum with another ignore_index,
    per row (bf16 logits)."""
    t, f32, bf16 = TensorArg("t", "int64"), TensorArg("x", "float32"), TensorArg("x", "bfloat16")
    return [
        NllLossSpec("nll_mean", f32, t, TensorArg("lse", "float32"), "mean", -100, "float32"),
        NllLossSpec("nll_sum", f32, t, TensorArg("lse", "float32"), "sum", 3, "float32"),
        NllLossSpec("nll_none_bf16", bf16, t, TensorArg("lse", "bfloat16"), "none", -100, "bfloat16"),
    ]


def conv_taps_specs() -> list[ConvTapMeansSpec]:
    """Conv tap means: transposed (level2/44's 3x3 stride 2 with output padding; 7x7, the most
    taps a kernel takes; a 4x2 with dilation), and convolutions (3x3 padded; 5x3 strided and
    dilated, where a tap's positions step by the stride)."""
    x = TensorArg("x", "float32")
    return [
        ConvTapMeansSpec("taps_t3s2", x, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), True),
        ConvTapMeansSpec("taps_t7", x, (7, 7), (1, 1), (0, 0), (1, 1), (0, 0), True),
        ConvTapMeansSpec("taps_t4x2", x, (4, 2), (3, 2), (2, 0), (2, 1), (1, 1), True),
        ConvTapMeansSpec("taps_c3p1", x, (3, 3), (1, 1), (1, 1), (1, 1), (0, 0), False),
        ConvTapMeansSpec("taps_c5x3", x, (5, 3), (3, 2), (2, 1), (1, 2), (0, 0), False),
    ]


def recurrent_specs() -> list[RecurrentSpec]:
    """Recurrent stacks: every cell, KernelBench's batch tile (10) and the extremes (1, 16),
    bidirectional, without biases, batch_first."""
    f = lambda n: TensorArg(n, "float32")  # noqa: E731

    def spec(name, cell, layers, dirs, tile, biases=True, batch_first=False):
        per = 4 if biases else 2
        return RecurrentSpec(name, cell, f("x"), f("h0"), layers, dirs, biases, batch_first, tile,
                             f("c0") if cell == "lstm" else None,
                             tuple(f(f"w{k}") for k in range(layers * dirs * per)))

    return [spec("rnn_lstm6", "lstm", 6, 1, 10), spec("rnn_gru6_bi", "gru", 6, 2, 10),
            spec("rnn_tanh_t16", "rnn_tanh", 2, 1, 16, biases=False, batch_first=True),
            spec("rnn_relu_t1_bi", "rnn_relu", 1, 2, 1), spec("rnn_lstm_t16_bi", "lstm", 2, 2, 16)]


def contraction_specs() -> list[ContractionSpec]:
    """torch.einsum contractions, one a tile (CONTRACTION_TILES) and 1-4 operands: Mamba2's chunk
    states (3 operands, two on side B), its state passing (m empty), a bmm, a GEMV (n empty), a
    sum over one index (one operand), four operands with 16-bit inputs and output."""
    f = lambda n, d="float32": TensorArg(n, d)  # noqa: E731
    return [
        ContractionSpec("ctr_mamba_states", (f("B"), f("decay"), f("X")), "bclhn,bhcl,bclhp->bchpn", (1, 1, 0),
                        "bch", "p", "n", "l", "float32", (64, 64)),
        ContractionSpec("ctr_mamba_passing", (f("w"), f("S")), "bhc,bchpn->bhpn", (0, 1), "bh", "", "pn", "c",
                        "float32", (1, 256)),
        ContractionSpec("ctr_bmm", (f("a"), f("b")), "bij,bjk->bik", (0, 1), "b", "i", "k", "j", "float32",
                        (64, 16)),
        ContractionSpec("ctr_gemv", (f("a"), f("x")), "ij,j->i", (0, 1), "", "i", "", "j", "float32", (256, 1)),
        ContractionSpec("ctr_sum", (f("a"),), "bij->bi", (0,), "b", "i", "", "j", "float32", (64, 64)),
        ContractionSpec("ctr_four_f16", (f("a", "float16"), f("b"), f("c", "bfloat16"), f("d")),
                        "abcd,bcd,cde,def->abef", (0, 0, 1, 1), "b", "a", "ef", "cd", "bfloat16", (16, 64)),
    ]


def attention_specs() -> list[AttentionSpec]:
    """Flash attention over every register layout (head dims a thread 1..8, 8 and 4 query rows a
    thread), the three storage dtypes, causal, a bool, an additive and a `!= 0` float mask,
    ReLU attention; the tensor-core kernel in tf32 / f16 / bf16 (16-bit inputs, and fp32 inputs
    under a precision opt-in) up to head dim 256."""
    def spec(name, head, dtype="float32", causal=False, mask=None, **more):
        q, k, v = (TensorArg(n, dtype) for n in "qkv")
        m = TensorArg("m", mask) if mask else None
        return AttentionSpec(name, q, k, v, head, 1.0 / head ** 0.5, dtype, causal, m, **more)

    return [
        spec("att_d16", 16), spec("att_d32", 32), spec("att_d48_causal", 48, causal=True),
        spec("att_d64_causal", 64, causal=True), spec("att_d80_f16", 80, "float16"),
        spec("att_d96_bf16_mask", 96, "bfloat16", mask="bool"), spec("att_d112_addmask", 112, mask="float32"),
        spec("att_d128", 128), spec("att_d128_causal_f16", 128, "float16", causal=True),
        spec("att_d64_mask", 64, mask="bool"),
        spec("att_d64_relu_nonzero", 64, mask="float32", score="relu", mask_nonzero=True),
        spec("att_d64_addmask_f16", 64, "float16", mask="float16"),
        spec("att_d32_relu_causal_bf16", 32, "bfloat16", causal=True, score="relu"),
        # the tensor-core kernel's own layouts: fp32 inputs under each precision opt-in, head dims
        # not a multiple of 16, above 128 (key tiles of 32) up to 256
        spec("att_d32_tf32", 32, precision="tf32"), spec("att_d64_tf32", 64, precision="tf32"), spec("att_d128_causal_tf32", 128, causal=True, precision="tf32"),
        spec("att_d40_addmask_tf32", 40, mask="float32", precision="tf32"),
        spec("att_d256_mask_tf32", 256, mask="bool", precision="tf32"),
        spec("att_d64_bf16_precision", 64, precision="bf16"),
        spec("att_d72_relu_fp16_precision", 72, score="relu", causal=True, precision="fp16"),
        spec("att_d160_causal_bf16", 160, "bfloat16", causal=True), spec("att_d256_f16", 256, "float16"),
        # head dims no 16-byte read divides: the tile loader's element-wise path
        spec("att_d20_f16", 20, "float16"), spec("att_d33_tf32", 33, precision="tf32"),
    ]


def mask_specs() -> list:
    """bool operands (masks read as 0 / 1): a where and a multiply (fp32: VEC 4, fp16: VEC 8 bools
    per load) and a masked cumulative sum."""
    x, m = TensorArg("x", "float32"), TensorArg("m", "bool")
    return [
        ElementwiseSpec("mask_where", (x, m), (E("where", ("m", "x", 0.0), "w"),), ("w",), "float32"),
        ElementwiseSpec("mask_mul_f16", (TensorArg("x", "float16"), m), (E("mul", ("x", "m"), "w"),), ("w",),
                        "float16"),
        ScanSpec("mask_cumsum", "sum", (x, m), 1, "float32", (E("mul", ("x", "m"), "p"),), "p"),
    ]


def cat_specs() -> list[CatSpec]:
    """Concatenations: segments with their producer's chain (a per-channel bias and ReLU, a
    sigmoid), plain copies, 16-bit storage along the last dim."""
    x, b, y, z = (TensorArg(n, "float32") for n in ("x", "b", "y", "z"))
    return [
        CatSpec("cat_fused", (x, b, y, z), (
            CatSegment((0, 1), (E("add", ("x", "b"), "t"), E("relu", ("t",), "u")), "u"),
            CatSegment((2,), (), "y"),
            CatSegment((3,), (E("sigmoid", ("z",), "s"),), "s")), 1, "float32"),
        CatSpec("cat_last_f16", (TensorArg("a", "float16"), TensorArg("c", "float16")),
                (CatSegment((0,), (), "a"), CatSegment((1,), (), "c")), -1, "float16"),
        # kept channels-last (agents/coder/layout.py): the binding's permuted path
        CatSpec("cat_fused_cl", (x, b, y, z), (
            CatSegment((0, 1), (E("add", ("x", "b"), "t"), E("relu", ("t",), "u")), "u"),
            CatSegment((2,), (), "y"),
            CatSegment((3,), (E("sigmoid", ("z",), "s"),), "s")), 1, "float32", keep_channels_last=True),
        # NHWC inputs into a contiguous result (agents/coder/layout.py's transposing_cats): the
        # tiled transposing kernel
        CatSpec("cat_fused_tr", (x, b, y, z), (
            CatSegment((0, 1), (E("add", ("x", "b"), "t"), E("relu", ("t",), "u")), "u"),
            CatSegment((2,), (), "y"),
            CatSegment((3,), (E("sigmoid", ("z",), "s"),), "s")), 1, "float32", channels_last_inputs=True),
        # ... with a batch_norm apply fused into a segment (5 operands: its 2-tile form)
        CatSpec("cat_bn_tr", (x, *(TensorArg(n, "float32") for n in ("m", "r", "w", "c")), y), (
            CatSegment((0, 1, 2, 3, 4), (E("sub", ("x", "m"), "t"), E("mul", ("t", "r"), "u"),
                                         E("mul", ("u", "w"), "v"), E("add", ("v", "c"), "q")), "q"),
            CatSegment((5,), (), "y")), 1, "float32", channels_last_inputs=True),
    ]


def batch_stats_specs() -> list[BatchStatsSpec]:
    """Training-mode batch_norm statistics: every operand role (a full-size operand read per
    value, a per-channel one, the running statistics), and a bare fp16 one."""
    x, b, y, rm, rv = (TensorArg(n, "float32") for n in ("x", "b", "y", "rm", "rv"))
    return [
        BatchStatsSpec("bstats_full", (x, b, y, rm, rv), 1e-5, 0.1,
                       (E("add", ("x", "b"), "t"), E("mul", ("t", "y"), "u"), E("relu", ("u",), "w")), "w",
                       ("b",), "rm", "rv"),
        BatchStatsSpec("bstats_half", (TensorArg("x", "float16"),), 1e-3, 0.0),
        # group_norm's statistics (a conv bias in the prologue: per thread on channels-last rows,
        # per value on an NCHW group's row) and a bare grouped one (the NCHW 16-byte form)
        BatchStatsSpec("bstats_groups", (x, b), 1e-5, 0.0, (E("add", ("x", "b"), "t"),), "t", ("b",), groups=4),
        BatchStatsSpec("bstats_groups_bare", (x,), 1e-5, 0.0, groups=2),
    ]


def batch_stats_merge_specs() -> list[BatchStatsMergeSpec]:
    """A concatenation's batch_norm statistics from three parts' (running statistics updated),
    and from two without running statistics."""
    a, b, c, x, rm, rv = (TensorArg(n, "float32") for n in ("a", "b", "c", "x", "rm", "rv"))
    return [BatchStatsMergeSpec("bmerge_running", (a, b, c, x, rm, rv), 3, 1e-5, 0.1, "rm", "rv"),
            BatchStatsMergeSpec("bmerge_plain", (a, b, x), 2, 1e-3, 0.0)]


def gemm_specs() -> list[GemmSpec]:
    return [
        GemmSpec(f"gemm_gelu_{d}", TensorArg("x", d), TensorArg("w", d), TensorArg("b", d), "gelu", d) for d in DTYPES
    ] + [GemmSpec("gemm_relu", TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"), "relu", "float32"),
         GemmSpec("gemm_gelu_3x", TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"), "gelu",
                  "float32", split_tf32=True)]


# ---------------------------------------------------------------- pure Python


def test_c_float_literals():
    assert c_float(0.5) == "0.5f"
    assert c_float(3.0) == "3.0f"
    assert c_float(1e-5) == "1e-05f"
    assert c_float(float("inf")) == "KS_INF"
    assert c_float(float("-inf")) == "(-KS_INF)"
    assert c_float(float("nan")) == "KS_NAN"


def test_compile_ops_every_op_and_ssa_renaming():
    for op in sorted(UNARY_OPS):
        fn = compile_ops("f", ("x",), (E(op, ("x",), "y"),), ("y",))
        assert "const float t0 = " in fn.source and "out0 = t0;" in fn.source
    for op in sorted(BINARY_OPS):
        fn = compile_ops("f", ("x", "z"), (E(op, ("x", 2.5), "y"),), ("y",))
        # Division by a constant is multiplication by its reciprocal (inline, no IEEE-div call).
        assert ("0.4f" if op == "div" else "2.5f") in fn.source and "in0" in fn.source
    fn = compile_ops("f", ("x", "z"), (E("div", ("x", "z"), "y"),), ("y",))
    assert "((in0) / (in1))" in fn.source  # tensor divisors keep IEEE division
    # Redefining a name gives a fresh register; the output is the last definition.
    fn = compile_ops("f", ("x",), (E("exp", ("x",), "x"), E("neg", ("x",), "x")), ("x",))
    assert "const float t1 = (-t0);" in fn.source and "out0 = t1;" in fn.source
    assert {op for op in ATTR_OPS} == {"clamp", "leaky_relu", "where"}


def test_the_tanh_of_a_softplus_is_one_expression():
    """mish written out (level2/52's tanh(softplus(x)) * x): the tanh reads ks_tanh_softplus of
    the softplus's argument (one __expf and a divide, not log1pf and tanhf); a tanh of anything
    else stays tanhf."""
    fn = compile_ops("f", ("x",), (E("softplus", ("x",), "s"), E("tanh", ("s",), "t"), E("mul", ("t", "x"), "y")),
                     ("y",))
    assert "const float t1 = ks_tanh_softplus(in0);" in fn.source and "out0 = t2;" in fn.source
    fn = compile_ops("f", ("x",), (E("exp", ("x",), "s"), E("tanh", ("s",), "t")), ("t",))
    assert "ks_tanh_softplus" not in fn.source and "tanhf(t0)" in fn.source
    assert "__device__ __forceinline__ float ks_tanh_softplus(float x)" in CUDA_PRELUDE


def test_compile_ops_rejects_bad_programs():
    with pytest.raises(ValueError, match="unsupported"):
        compile_ops("f", ("x",), (E("frobnicate", ("x",), "y"),), ("y",))
    with pytest.raises(ValueError, match="not defined"):
        compile_ops("f", ("x",), (E("add", ("x", "q"), "y"),), ("y",))
    with pytest.raises(ValueError, match="takes 1"):
        compile_ops("f", ("x",), (E("relu", ("x", "x"), "y"),), ("y",))
    with pytest.raises(ValueError, match="neither"):
        compile_ops("f", ("x",), (), ("nope",))


def test_formulas_follow_pytorch():
    assert "erff(x * 0.70710678118654752440f)" in CUDA_PRELUDE  # exact GELU
    assert "x > 20.f ? x : log1pf(__expf(x))" in CUDA_PRELUDE  # softplus threshold 20
    assert "0.044715f" in CUDA_PRELUDE  # tanh GELU


def test_emitters_are_deterministic_and_prefix_symbols():
    for spec in elementwise_specs() + reduction_specs() + gemm_specs():
        a, b = emit(spec), emit(spec)
        assert a == b
        assert a.function == spec.name
        for sym in re.findall(r"__global__ void(?: __launch_bounds__\([^)]*\))?\s+(\w+)", a.cuda):
            assert sym.startswith(spec.name + "_"), sym


def test_strided_vec_reads_row_contiguous_strided_operands_in_the_vector_kernel():
    """emit_elementwise(spec, strided_vec=True): every operand goes through ks_load_strided_rows
    (a KS_STRIDED operand one offset per VEC elements and a vector load, others as ks_load), and
    the binding lets ks_describe accept such operands for the vector kernel; the default since it
    was timed (bench/results/2026-12-07-h100-s38); strided_vec=False gives the text before it
    (ks_load, no flag).  (tests/test_elementwise_strided_gpu.py runs both against torch.)"""
    spec = chain_spec("sv", "float32")
    default, strided = emit_elementwise(spec, strided_vec=False), emit_elementwise(spec)
    assert "ks_load_strided_rows<VEC>(in0, d0, i, a0)" in strided.cuda
    assert "ks_load_strided_rows<" not in default.cuda.split("// ---- elementwise kernel")[1]
    assert ", {{vec}}, descs, true);".replace("{{vec}}", "4") in strided.binding
    assert ", 4, descs);" in default.binding
    assert "bool strided_rows = false" in BINDING_PRELUDE
    assert "if (d.mode == KS_STRIDED) {\n      ks_ld_vec<VEC>(p + ks_offset(d, i), v);" in CUDA_PRELUDE


def test_tiled_any_dim_asks_the_binding_for_transposed_operands_at_any_dim():
    """emit_elementwise(spec, tiled_any_dim=True): the binding asks ks_tiled_operand for an
    operand transposed at any dim and launches the tiled kernels over its [N, C, S] view; the
    default asks for channels-last only, as before (tests/test_tiled_view.py runs the choice on
    CPU tensors, tests/test_elementwise_tiled_gpu.py the kernels on a GPU)."""
    spec = chain_spec("ta", "float32")
    default, any_dim = emit_elementwise(spec), emit_elementwise(spec, tiled_any_dim=True)
    assert "ks_tiled_operand({&in_0, &in_1}, s, false)" in default.binding
    assert "ks_tiled_operand({&in_0, &in_1}, s, true)" in any_dim.binding
    for binding in (default.binding, any_dim.binding):
        assert "_launch_nhwc(ins, descs, outs, tiled, view.N, view.C, view.S, stream)" in binding
    assert default.cuda == any_dim.cuda  # the kernels are the same; only the binding's choice differs


def test_the_column_loops_tail_is_batched_only_on_request():
    """ReductionVariant(colloop_tail_batch=True): the column loop's last R % 8 values load as one
    predicated batch and push in order; the default keeps the one-at-a-time loop
    (tests/test_colloop_tail_gpu.py compares the two on a GPU)."""
    from kernelstitch.agents.coder.codegen.reduction.context import ReductionVariant

    spec = next(s for s in reduction_specs() if s.name == "red_mean_spatial")
    default = emit_reduction(spec).cuda
    batched = emit_reduction(spec, ReductionVariant(colloop_tail_batch=True)).cuda
    assert "for (; r < R; ++r) {" in default and "const int left = (int)(R - r);" not in default
    assert "const int left = (int)(R - r);  // 1 .. 7" in batched and "for (; r < R; ++r) {" not in batched
    assert "if (u < left) st.push(x[u]);" in batched


def test_vector_path_uses_16_byte_accesses():
    src = emit_elementwise(chain_spec("v", "float16")).cuda
    assert "v_kernel<8>" in src  # 8 x half = 16 bytes
    assert "w_kernel<4>" in emit_elementwise(chain_spec("w", "float32")).cuda
    assert "__ldg(reinterpret_cast<const uint4*>(p) + c)" in CUDA_PRELUDE
    assert "reinterpret_cast<uint4*>(p)[c] = KsPack<T>::pack" in CUDA_PRELUDE
    red = emit_reduction(reduction_specs()[0]).cuda
    assert "red_sum_row<4, 8, true, 1, 256>" in red and "red_sum_row<4, 8, false, 1, 512>" in red
    assert "ks_load_row<VEC>" in red
    assert "red_sum_cols" not in red and "red_sum_row<4, 4, false, 2, 512>" not in red  # reduce kinds: as before
    assert "red_sum_row<4, 8, false, 4, 256>" not in red
    softmax = emit_reduction(next(s for s in reduction_specs() if s.kind == "softmax")).cuda
    # normalising rows: 16 values per thread under a 64-register cap, or 32 on <= 256 threads at 4
    # blocks per SM (tested first: the 512-thread 32-value kernel is for longer rows); column tiles
    assert "_row<4, 4, false, 2, 512>" in softmax and "plan.row_values == 16" in softmax
    rows32 = softmax.index("_row<4, 8, false, 4, 256>")
    assert "plan.row_values == 32 && plan.threads_x <= 256" in softmax
    assert rows32 < softmax.index("_row<4, 8, false, 1, 512>")
    assert "_cols<<<" in softmax


def test_preludes_are_guarded_and_assembly_is_one_unit():
    gemm_relu = [g for g in gemm_specs() if g.name == "gemm_relu"]
    kernels = [emit(s) for s in elementwise_specs()[:2] + reduction_specs()[:1] + gemm_relu]
    cpp, cuda, names = build_extension_sources(kernels)
    assert names == [k.function for k in kernels]
    assert cuda.count("#ifndef KS_CUDA_PRELUDE_H") == 3  # the GEMM without erf GELU or 3xTF32 has no cuda
    assert cpp.startswith("\n" + BINDING_PRELUDE) and cpp.count("#ifndef KS_GEMM_PRELUDE_H") == 1
    for k in kernels:
        assert k.launcher_decl in cpp and k.binding in cpp
    with pytest.raises(ValueError, match="duplicate"):
        build_extension_sources(kernels + kernels[:1])


def test_kernels_identical_but_for_their_name_are_compiled_once():
    """A ResNet's repeated steps: the second copy's binding calls the first one's launchers, the
    cuda text holds one kernel, and every function keeps its own name."""
    base = [chain_spec("ks_s1_elementwise", "float32"), reduction_specs()[0]]
    copies = [replace(base[0], name="ks_s7_elementwise"), replace(base[1], name=base[1].name + "_again")]
    other = chain_spec("ks_s9_elementwise", "float16")  # differs beyond its name: compiled too
    kernels = [emit(s) for s in base + copies + [other]]
    cpp, cuda, names = build_extension_sources(kernels)
    assert names == [k.function for k in kernels]
    assert "ks_s1_elementwise_kernel" in cuda and "ks_s7_elementwise_kernel" not in cuda
    assert "ks_s9_elementwise_kernel" in cuda
    assert copies[1].name + "_launch" not in cpp and base[1].name + "_launch" in cuda
    # the same binding too: one line forwarding to the first one's binding
    forward = "at::Tensor ks_s7_elementwise(at::Tensor in_0, at::Tensor in_1) { return ks_s1_elementwise(in_0, in_1); }"
    assert forward in cpp and "ks_s7_elementwise_launch" not in cpp
    assert cpp.count("void ks_s1_elementwise_launch(") == 1  # one prototype


def test_a_copy_whose_binding_differs_calls_the_first_ones_launchers():
    """Two reductions whose kernels are the same text but whose bindings differ (the dim is the
    binding's): the copy keeps its own binding body, calling the first one's launchers."""
    first = reduction_specs()[0]
    other_dim = replace(first, name="red_other_dim", dim=first.dim - 1)
    kernels = [emit(first), emit(other_dim)]
    if renamed_kernel(kernels[0].cuda, first.name) != renamed_kernel(kernels[1].cuda, other_dim.name):
        pytest.skip("the dim changed the kernel text too: nothing to alias")
    cpp, cuda, _ = build_extension_sources(kernels)
    alias = cpp[cpp.index("at::Tensor red_other_dim("):]
    alias = alias[:alias.index("\n}\n")]
    assert f"{first.name}_launch" in alias and "red_other_dim_launch" not in cpp
    assert f"return {first.name}(" not in alias


def test_elementwise_tiled_path_is_instantiated_for_the_named_inputs_only():
    spec = chain_spec("ew_tiled", "float32")
    everyone = emit_elementwise(spec)
    assert "ew_tiled_nhwc<0>" in everyone.cuda and "ew_tiled_nhwc<1>" in everyone.cuda
    assert "if (tiled >= 0)" in everyone.binding
    first = emit_elementwise(replace(spec, tiled_inputs=(0,)))
    assert "ew_tiled_nhwc<0>" in first.cuda and "ew_tiled_nhwc<1>" not in first.cuda
    assert "if (tiled == 0)" in first.binding
    none = emit_elementwise(replace(spec, tiled_inputs=()))
    assert "ew_tiled_nhwc<" not in none.cuda.split("_launch_nhwc")[-1] and "if (false)" in none.binding


def test_channels_last_narrow_kernel_only_where_its_shared_memory_fits():
    """Fewer than 32 channels take the narrow kernel (a contiguous run of positions x channels a
    block); with eleven outputs and many inputs its staged row values would pass 48 KB of static
    shared memory, and the wide kernel serves every channel count."""
    spec = chain_spec("ew_narrow", "float32")
    small = emit_elementwise(spec)
    assert "ew_narrow_nhwc_narrow<0>" in small.cuda and "const bool narrow = C < 32;" in small.cuda
    outs = tuple(f"o{k}" for k in range(11))
    wide = ElementwiseSpec(
        "ew_wide", tuple(TensorArg(f"x{k}", "float32") for k in range(8)),
        tuple(E("add", (f"x{k % 8}", f"x{(k + 1) % 8}"), f"o{k}") for k in range(11)), outs, "float32")
    big = emit_elementwise(wide)
    assert "_nhwc_narrow" not in big.cuda and "const bool narrow = false;" in big.cuda
    assert "ew_wide_nhwc<0>" in big.cuda


def test_reductions_view_a_channels_last_input_as_rows_but_normalisations_do_not():
    """The binding's channels-last re-view (reduction over dim 1 alone: rows of [N * S, C]) is in
    every reduce kind's binding, with the input-shaped operands permuted and the epilogue's not;
    a softmax's output has the input's shape, so it keeps the column kernels."""
    args = (TensorArg("x", "float32"), TensorArg("b", "float32"), TensorArg("e", "float32"))
    red = emit(ReductionSpec("r_c", "sum", args, dim=1, keepdim=False, out_dtype="float32",
                             prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
                             epilogue=(E("add", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    assert "ks_channels_last_operand({&in_0}, in_0.sizes()) == 0" in red.binding
    assert "in_0 = ks_channels_to_last(in_0, nd);" in red.binding and "in_1 = ks_channels_to_last(in_1, nd);" in red.binding
    assert "in_2 = ks_channels_to_last" not in red.binding  # the epilogue's operand: the output's shape
    soft = emit(ReductionSpec("s_c", "softmax", args[:1], dim=1, keepdim=False, out_dtype="float32"))
    assert "ks_channels_to_last" not in soft.binding


def test_global_pooling_views_a_channels_last_input_as_columns_only_with_column_kernels():
    """Every spatial dim reduced: the channels-last re-view covers it only in a build with column
    kernels (a `trailing` build has none and reads such an input through its strides); all but
    the batch dim is rows in either layout, so the trailing build views it too."""
    x = (TensorArg("x", "float32"),)
    columns = emit(ReductionSpec("g_c", "mean", x, dim=2, dim_count=2, keepdim=True, out_dtype="float32"))
    trailing = emit(ReductionSpec("g_t", "mean", x, dim=2, dim_count=2, keepdim=True, out_dtype="float32",
                                  trailing=True))
    assert "|| (dim == 2 && count == nd - 2)" in columns.binding
    assert "ks_channels_to_last(in_0, nd)" in trailing.binding
    assert "|| (dim == 2 && count == nd - 2)" not in trailing.binding
    assert "count == nd - 1" in trailing.binding


def test_split_extension_kernels_keeps_name_only_copies_together_and_balances_the_text():
    """The GPU tests' parallel extensions: every kernel in exactly one part, at most `parts`
    parts, copies but for the name with their first (one compile, an alias binding), and no part
    heavier than the lightest by more than the heaviest family's text."""
    from kernelstitch.agents.coder.codegen import split_extension_kernels
    from kernelstitch.agents.coder.codegen.common import renamed_kernel

    specs = elementwise_specs() + reduction_specs()[:4]
    specs += [replace(specs[0], name="ew_copy"), replace(reduction_specs()[0], name="red_copy")]
    kernels = [emit(s) for s in specs]
    for parts in (1, 3, 8, 100):
        groups = split_extension_kernels(kernels, parts)
        assert 1 <= len(groups) <= parts
        assert sorted(k.function for g in groups for k in g) == sorted(k.function for k in kernels)
        where = {k.function: i for i, g in enumerate(groups) for k in g}
        assert where["ew_copy"] == where[specs[0].name] and where["red_copy"] == where[reduction_specs()[0].name]
        families = {renamed_kernel(k.cuda, k.function) for k in kernels}
        weights = [sum(len(t) for t in {renamed_kernel(k.cuda, k.function) for k in g}) for g in groups]
        assert max(weights) - min(weights) <= max(len(t) for t in families)
        cpp, _, names = build_extension_sources(groups[0])  # each part assembles on its own
        assert names == [k.function for k in groups[0]] and cpp


def test_group_norm_reads_a_channels_last_input_with_its_nhwc_kernels_only_where_operands_allow():
    """group_norm's binding takes the NHWC kernels for a channels-last input whose other operands
    are all constant along the spatial dims (checked operand by operand), else copies the input
    to NCHW; the launcher tries them before the channel-span kernels (which also set a span)."""
    args = (TensorArg("x", "float32"), TensorArg("cb", "float32"), TensorArg("w", "float32"),
            TensorArg("bb", "float32"), TensorArg("e", "float32"))
    gn = emit(ReductionSpec("gn_cl", "group_norm", args, dim=1, keepdim=False, out_dtype="float32", groups=4,
                            weight="w", bias="bb", prologue=(E("add", ("x", "cb"), "p"),), prologue_out="p",
                            epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",),
                            trailing=True))
    assert all(f"ks_spatially_constant(in_{k}, nd)" in gn.binding for k in range(1, 5))
    assert "if (!gn_nhwc) in_0 = in_0.contiguous();" in gn.binding
    assert "gn_cl_gn_nhwc_stats" in gn.cuda and "gn_cl_gn_nhwc_apply<4, KEEP, P><<<" in gn.cuda
    # one lane a channel, or (16 and 8 channels) a warp over 2 or 4 positions
    assert all(f"KS_GN_NHWC_APPLY(false, {p});" in gn.cuda for p in (1, 2, 4))
    assert "KS_GN_NHWC_APPLY(true" not in gn.cuda  # the KEEP form only where a spec keeps
    assert "plan.nhwc_out = false" in gn.binding and "MemoryFormat::ChannelsLast" not in gn.binding
    assert gn.cuda.index("plan.nhwc_channels > 0") < gn.cuda.index("plan.span > 0")
    # every operand but the input is loaded once a thread (the per-channel hoists)
    for k, prefix in ((1, "a"), (2, "w"), (3, "w"), (4, "e")):
        assert f"float {prefix}{k}[1] = {{ks_ld(p{k} + ks_row_base_any(d{k}, row, S))}};" in gn.cuda


def test_group_norm_kept_channels_last_allocates_nhwc_only_for_its_nhwc_kernels():
    """keep_channels_last: the output is allocated NHWC / NDHWC when the NHWC kernels run (the
    apply's KEEP instantiation stores it so, no transposing tile), else the other kernels' NCHW
    result is copied once; ranks other than 4-5 stay as they were."""
    args = (TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"))
    spec = ReductionSpec("gn_keep", "group_norm", args, dim=1, keepdim=False, out_dtype="float32", groups=4,
                         weight="w", bias="b", trailing=True, keep_channels_last=True)
    gn = emit(spec)
    assert "plan.nhwc_out = true && (nd == 4 || nd == 5);" in gn.binding
    assert ".memory_format(gn_nhwc && (nd == 4 || nd == 5) ? (nd == 4 ? at::MemoryFormat::ChannelsLast" in gn.binding
    assert "if (!gn_nhwc && (nd == 4 || nd == 5)) out = out.contiguous(" in gn.binding
    assert all(f"KS_GN_NHWC_APPLY(true, {p});" in gn.cuda for p in (1, 2, 4)) and "if constexpr (KEEP) return;" in gn.cuda
    assert spec_from_json(spec_to_json(spec)) == spec


def test_softmax_over_channels_takes_its_nhwc_kernel_only_in_builds_with_column_kernels():
    """A softmax kind over dim 1 gets the channels-last check (operands constant along the
    spatial dims, else a copy to NCHW) and the NHWC kernel launched before the column kernels;
    a softmax over the last dim (built `trailing`) has neither."""
    args = (TensorArg("x", "float32"), TensorArg("b", "float32"), TensorArg("e", "float32"))
    sm = emit(ReductionSpec("sm_c", "softmax", args, dim=1, keepdim=False, out_dtype="float32",
                            prologue=(E("add", ("x", "b"), "p"),), prologue_out="p",
                            epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",)))
    assert "ks_spatially_constant(in_1, nd) && ks_spatially_constant(in_2, nd)" in sm.binding
    assert "if (sm_channels_last && !sm_nhwc) in_0 = in_0.contiguous();" in sm.binding
    assert "sm_c_softmax_nhwc<<<" in sm.cuda
    assert sm.cuda.index("sm_c_softmax_nhwc<<<") < sm.cuda.index("sm_c_colreg<KS_COLREG_MAX_R><<<")
    assert "float a1[1] = {ks_ld(p1 + ks_row_base_any(d1, row, S))};" in sm.cuda  # once a thread
    assert "epis[0 * Ci + t] = ks_ld(p2 + ks_row_base_any(d2, row, S));" in sm.cuda  # once a block
    last = emit(ReductionSpec("sm_l", "softmax", args[:1], dim=-1, keepdim=False, out_dtype="float32",
                              trailing=True))
    assert "sm_nhwc" not in last.binding and "sm_l_softmax_nhwc" not in last.cuda


def test_an_elementwise_step_kept_channels_last_runs_on_the_permuted_views():
    """keep_channels_last (the coder's layout decision) adds the binding's channels-last path: the
    kernel on the views with the channels last, the result moved back (a channels-last tensor);
    without it, or with several outputs, there is none; the flag survives the plan's JSON."""
    from kernelstitch.agents.plan.kernel_spec import spec_from_json, spec_to_json

    base = chain_spec("ew_k", "float32")
    kept = replace(base, keep_channels_last=True)
    text = emit(kept).binding
    assert "ks_full_channels_last({&in_0, &in_1}, c10::IntArrayRef(shape))" in text
    assert "return ew_k(ks_channels_to_last(in_0, nd), ks_channels_to_last(in_1, nd)).movedim(-1, 1);" in text
    assert "ks_full_channels_last" not in emit(base).binding
    two = ElementwiseSpec("ew_k2", (TensorArg("x", "float32"),), (E("relu", ("x",), "a"), E("neg", ("a",), "b")),
                          ("a", "b"), "float32", keep_channels_last=True)
    assert "ks_full_channels_last" not in emit(two).binding
    assert spec_from_json(spec_to_json(kept)) == kept and "keep_channels_last" not in spec_to_json(base)


def test_binding_contract():
    ew = emit_elementwise(elementwise_specs()[-1])
    assert ew.python_args == ("x", "h")
    assert "std::vector<at::Tensor> ew_mixed_in(" in ew.binding  # two outputs
    assert "C10_CUDA_KERNEL_LAUNCH_CHECK()" in ew.binding and "getCurrentCUDAStream" in ew.binding
    red = emit_reduction(reduction_specs()[0])
    assert "if (dim < 0) dim += nd;" in red.binding and "at::empty(out_shape" in red.binding
    g = emit_gemm(GemmSpec("g", TensorArg("x", "float16"), TensorArg("w", "float16"), None, "gelu_tanh", "float16"))
    assert "CUBLASLT_EPILOGUE_GELU," in g.binding and g.python_args == ("x", "weight")
    g = emit_gemm(GemmSpec("g", TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"), "relu", "float32", "kn"))
    assert "CUBLASLT_EPILOGUE_RELU_BIAS" in g.binding and "allowTF32CuBLAS" in g.binding
    with pytest.raises(ValueError, match="one dtype"):
        emit_gemm(GemmSpec("g", TensorArg("x", "float16"), TensorArg("w", "float32"), None, "none", "float16"))


def test_split_tf32_gemm_emits_the_splitting_pass_and_three_products():
    spec = GemmSpec("g3", TensorArg("x", "float32"), TensorArg("w", "float32"), TensorArg("b", "float32"), "gelu",
                    "float32", split_tf32=True)
    g = emit_gemm(spec)
    assert "ks_gemm_split_tf32(x2, weight, &bias, y2, w_kn, CUBLASLT_EPILOGUE_BIAS, stream, g3_split_launch);" in g.binding
    assert "g3_gelu_launch(" in g.binding  # exact GELU still runs after the three products
    assert "void g3_split_launch(" in g.launcher_decl and "void g3_gelu_launch(" in g.launcher_decl
    assert "g3_split_kernel" in g.cuda and "g3_gelu_kernel" in g.cuda
    assert any("3xTF32" in note for note in g.notes)
    # strided operands go to the splitting pass as they are: no PyTorch copy before it
    assert "x2 = x2.contiguous()" not in g.binding and "weight = weight.contiguous()" not in g.binding
    # a precision opt-in computes in its own math, and 16-bit operands never split
    for other in (replace(spec, precision="tf32"), replace(spec, x=TensorArg("x", "float16"), weight=TensorArg("w", "float16"),
                                                         bias=TensorArg("b", "float16"), out_dtype="float16")):
        plain = emit_gemm(other)
        assert "ks_gemm_split_tf32(x2" not in plain.binding and "split_kernel" not in plain.cuda
        assert "x2 = x2.contiguous()" in plain.binding
    assert spec_from_json(spec_to_json(spec)) == spec
    assert "split_tf32" not in spec_to_json(replace(spec, split_tf32=False))


def test_conv_split_cat_binding_contract():
    k = emit_split_cat()
    assert k.function == "ks_split_cat_tf32" and k.python_args == ("t", "dim", "weight_order")
    assert "at::Tensor ks_split_cat_tf32(at::Tensor t, int64_t dim, bool weight_order)" in k.binding
    assert "shape[dim] *= 3;" in k.binding and "ks_split_tf32(" in k.cuda
    assert "void ks_split_cat_tf32_launch(" in k.launcher_decl


def test_layout_swap_binding_contract():
    k = emit_layout_swap()
    assert k.function == "ks_layout_swap" and k.python_args == ("t", "channels_last")
    assert "at::Tensor ks_layout_swap(at::Tensor t, bool channels_last)" in k.binding
    # PyTorch's copy where the kernel does not apply, the input itself where nothing is to do
    assert "return t.contiguous(target);" in k.binding and "if (t.is_contiguous(target)) return t;" in k.binding
    assert "void ks_layout_swap_launch(" in k.launcher_decl and "bool ks_layout_swap_fits(" in k.launcher_decl
    assert "<uint32_t>" in k.cuda and "<uint16_t>" in k.cuda  # 4- and 2-byte elements


def test_spec_validation():
    with pytest.raises(ValueError, match="identifier"):
        emit_elementwise(chain_spec("bad-name", "float32"))
    with pytest.raises(ValueError, match="only for layer_norm"):
        emit_reduction(ReductionSpec("r", "sum", (TensorArg("x", "float32"), TensorArg("w", "float32")), -1, False, "float32", weight="w"))
    with pytest.raises(ValueError, match="not one of the inputs"):
        emit_reduction(ReductionSpec("r", "sum", (TensorArg("x", "float32"),), -1, False, "float32", epilogue_inputs=("q",)))


# ---------------------------------------------------------------- nvcc


_SAFE_MESSAGE_ARG = re.compile(
    r'^(".*"|"[^"]*"\s*#\w+\s*"[^"]*"|ks_str\(.*\)|std::string\(.*\)|name|t\.device\(\)|device|dtype|'
    r't\.scalar_type\(\)|t)$',
    re.S)


def _torch_check_message_args(source: str) -> list[str]:
    """Every message argument (after the condition) of every TORCH_CHECK in `source`."""
    args_out = []
    for match in re.finditer(r"TORCH_CHECK\(", source):
        depth, i, start, args = 1, match.end(), match.end(), []
        while depth:
            ch = source[i]
            if ch == '"':  # skip string literals (they may hold commas and parentheses)
                i = source.index('"', i + 1)
            elif ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "," and depth == 1:
                args.append(source[start:i].strip())
                start = i + 1
            i += 1
        args.append(source[start:i - 1].strip())
        args_out += [a.replace("\\\n", " ").strip() for a in args[1:]]
    return args_out


def test_bindings_open_with_marks_after_every_prototype():
    """build_extension_sources marks each binding with its function and declares every binding
    first (copies forwarding to their first one included), so the build may split them."""
    specs = elementwise_specs()[:2] + batch_stats_merge_specs() + [replace(elementwise_specs()[0], name="ew_copy")]
    cpp, _, names = build_extension_sources([emit(s) for s in specs])
    first_mark = cpp.index("// ks-binding: ")
    for name in names:
        assert cpp.count(f"\n// ks-binding: {name}\n") == 1
        proto = next(line for line in cpp[:first_mark].splitlines() if f" {name}(" in line and line.endswith(");"))
        assert proto[:-1] + " {" in cpp[first_mark:] or proto[:-1] + " { return" in cpp[first_mark:]


def test_error_messages_stream_no_numbers():
    """Integers in TORCH_CHECK messages segfaulted the extension on the H100 image: numbers
    must go through ks_str (a string), never through operator<<."""
    specs = elementwise_specs() + reduction_specs() + pool_specs() + batch_stats_specs() + batch_stats_merge_specs() + scan_specs() + mask_specs() + cat_specs() + arg_reduce_specs() + triangle_specs() + nll_specs() + conv_taps_specs() + contraction_specs() + [
        GemmSpec("g_msg", TensorArg("x", "float32"), TensorArg("w", "float32"),
                 TensorArg("b", "float32"), "gelu", "float32")]
    cpp, cuda, _ = build_extension_sources([emit(s) for s in specs])
    args = _torch_check_message_args(cpp + cuda)
    assert len(args) > 20  # the parser found the checks
    unsafe = sorted({a for a in args if not _SAFE_MESSAGE_ARG.match(a)})
    assert unsafe == []


def test_every_binding_compiles_as_host_cpp(tmp_path):
    """The bindings (host C++ against ATen, the text nvcc never sees) of every spec family the
    spill check compiles, through g++ -fsyntax-only: a binding error otherwise first shows on the
    GPU machine, where it fails every program of that family (the GEMMs' bindings need cublasLt.h,
    which the CPU machines lack, and are left out)."""
    flags = host_include_flags(tmp_path)
    if flags is None:
        pytest.skip("needs g++, the CUDA runtime headers and torch's c10/cuda headers")
    specs = [s for s in _spill_specs() if not isinstance(s, GemmSpec)]
    cpp, _, _ = build_extension_sources([emit(s) for s in specs])
    (tmp_path / "bindings.cpp").write_text(cpp)
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Werror=div-by-zero", *flags,
                           str(tmp_path / "bindings.cpp")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(specs) > 80 and cpp.count("TORCH_CHECK") > 100  # the families are all there


def _ptxas_report(text: str) -> dict[str, str]:
    """Kernel (mangled) name -> its 'N bytes spill stores, M bytes spill loads' line."""
    report, current = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and current:
            report[current] = m.group(0)
            current = None
    return report


# nvcc units of the spill check, heaviest first: the pool's two threads then finish together
# instead of one compiling the last heavy reduction alone (LPT order).  Wall seconds of one nvcc
# per spec, two at a time on the 2-core VM (2026-11-27, after group_norm's out-of-line strided
# offset and the trailing reductions' missing column kernels): red_group_norm 57, red_softmax 31,
# red_softmax_bfloat16 15, red_logsumexp 10, red_sum 8, red_group_norm_f16 8; every other spec
# under 6 (elementwise, GEMM, pool, attention, batch-stats texts 1-6).  The light ones share a
# unit (one front end and host compile for many texts).  Specs not compiled by default
# (tests/spill_scope.py) are skipped.
_HEAVY_SPECS = ("red_group_norm", "red_softmax", "red_softmax_bfloat16", "red_softmax_float16",
                "red_log_softmax", "red_logsumexp", ("red_mean", "red_sum"),
                ("red_group_norm_f16", "red_sum_bfloat16", "red_amin", "red_sum_float16"))


def _spill_specs() -> list:
    """The specs the spill check compiles: all of them with KERNELSTITCH_SPILL_CHECK=all, else
    every non-reduction spec and the representative reductions (tests/spill_scope.py)."""
    reductions = [s for s in reduction_specs() if full_spill_check() or s.name in REPRESENTATIVE_REDUCTIONS]
    return elementwise_specs() + gemm_specs() + reductions + pool_specs() + batch_stats_specs() + batch_stats_merge_specs() + scan_specs() + mask_specs() + cat_specs() + arg_reduce_specs() + triangle_specs() + nll_specs() + conv_taps_specs() + attention_specs() + recurrent_specs() + contraction_specs()


def _spill_units(specs: list) -> list[list[str]]:
    """The emitted `cuda` text of each of `specs`, in compile units (lists of texts), heaviest first."""
    texts = {s.name: emit(s).cuda for s in specs}
    units = [[texts.pop(n) for n in ((names,) if isinstance(names, str) else names) if n in texts]
             for names in _HEAVY_SPECS]
    light_reductions = [texts.pop(s.name) for s in reduction_specs() if s.name in texts]
    # the 3xTF32 convolutions' splitting pass belongs to no spec: it joins the light unit
    return [u for u in units if u] + [light_reductions, [*texts.values(), emit_split_cat().cuda, emit_layout_swap().cuda]]


@pytest.mark.nvcc
# every kernel family's instantiations: minutes of ptxas on 2 cores; red_group_norm's unit alone
# took over 600 s on the VM under a load of 7 (other builds beside the suite): a timeout there
# says nothing about the kernels, so each nvcc may take 1500 s
@pytest.mark.timeout(1800)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_cuda_text_compiles_for_sm90a_without_spills():
    specs = _spill_specs()
    groups = _spill_units(specs)
    assert sum(map(len, groups)) == len(specs) + 2  # every checked spec's text once, the conv split, the layout swap
    if not full_spill_check():  # the representatives exist (a renamed spec must not drop out)
        assert REPRESENTATIVE_REDUCTIONS <= {s.name for s in specs}
    with tempfile.TemporaryDirectory() as tmp:
        def compile_group(k: int) -> tuple[int, str]:
            path = Path(tmp) / f"group{k}.cu"
            path.write_text("\n".join(groups[k]))
            # -cubin: no host compile (gcc), ~4 s a unit; the front end still checks host code
            flags = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-Xptxas", "-v", "-cubin", "-o", "/dev/null"]
            return nvcc_report(flags, path, timeout_s=1500)  # tests/spill_scope.py: cached by text

        with ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(compile_group, range(len(groups))))
    kernels = {}
    for returncode, output in results:
        assert returncode == 0, output[-4000:]
        kernels.update(_ptxas_report(output))
    spilling = {k: v for k, v in kernels.items() if v != "0 bytes spill stores, 0 bytes spill loads"}
    assert not spilling, spilling
    # every spec contributed kernels: elementwise x2, reductions >= 6, exact-GELU GEMMs x1
    checked_reductions = [s for s in specs if isinstance(s, ReductionSpec)]
    for spec in elementwise_specs() + checked_reductions + pool_specs() + batch_stats_specs():
        assert sum(spec.name + "_" in k for k in kernels) >= 2, spec.name
    assert len(kernels) >= 2 * len(elementwise_specs()) + 6 * len(checked_reductions) + 3


# The host plan (ks_plan_reduction, in codegen/cuda/ks_shared_types.h) compiled and run on this machine: which
# reduction path and block shape each [outer, R, inner] view gets on a given device.
H100 = (132, 227 * 1024)  # SMs, opt-in shared memory per block
SMALL_SMEM = (132, 48 * 1024)
_PLAN_CASES = [  # outer, R, inner, device, normalising, force_tile -> path, threads x, y, values
    # normalising: True for softmax kinds (with the rows32 kernel), "layer_norm" for one without
    ((16384, 8192, 1, H100, True, False), ("row_block", 256, 1, 32)),  # normalising: 32 on 256
    ((16384, 6000, 1, H100, True, False), ("row_block", 256, 1, 32)),
    ((16384, 4096, 1, H100, True, False), ("row_block", 256, 1, 16)),  # shorter: 16 values
    ((16384, 2000, 1, H100, True, False), ("row_block", 128, 1, 16)),
    ((16384, 8192, 1, H100, "layer_norm", False), ("row_block", 512, 1, 16)),  # no rows32 kernel
    ((16384, 8192, 1, H100, False, False), ("row_block", 256, 1, 32)),  # reduce kinds: 32
    ((1024, 16384, 1, H100, True, False), ("row_block", 512, 1, 32)),  # longer rows: 32
    ((1000, 1000, 1, H100, True, False), ("row_warp", 32, 8, 32)),  # a warp per row
    ((1000, 512, 1, H100, True, False), ("row_sub", 32, 8, 16)),  # <= 512: lane groups, 16 values a lane
    ((100_000, 64, 1, H100, "layer_norm", False), ("row_sub", 4, 8, 16)),  # 8 rows a warp
    ((100_000, 17, 1, H100, False, False), ("row_sub", 2, 8, 16)),
    ((100_000, 1, 1, H100, False, False), ("row_sub", 1, 8, 16)),  # a thread per row
    ((16, 16, 131_072, H100, False, False), ("colloop", 256, 1, 0)),  # strided, columns fill the GPU: a thread each
    ((1, 16, 32_768, H100, False, False), ("tile", 128, 2, 0)),  # too few columns: short R gives threads to inner
    ((16, 3, 4096, H100, False, False), ("tile", 256, 1, 0)),  # 65536 columns < 132 x 512
    ((16, 3, 8192, H100, False, False), ("colloop", 256, 1, 0)),
    ((16, 5000, 8192, H100, False, False), ("tile", 32, 8, 0)),  # R > KS_COLLOOP_MAX_R
    ((16, 64, 8192, H100, "layer_norm", True), ("tile", 32, 8, 0)),  # affine kinds replan with force_tile
    ((32, 300, 4096, H100, True, False), ("colloop", 256, 1, 0)),  # strided softmax over many columns
    ((8, 300, 4096, H100, True, False), ("cols", 16, 16, 0)),  # fewer columns: column tiles
    ((8, 1024, 4096, H100, True, False), ("cols", 16, 32, 0)),  # [1024, 16] fp32: 64 KB
    ((8, 3400, 4096, H100, True, False), ("cols", 16, 64, 0)),  # 212.5 KB + static: fits
    ((8, 3500, 4096, H100, True, False), ("tile", 32, 8, 0)),  # 218.75 KB + static: does not
    ((8, 1024, 4096, SMALL_SMEM, True, False), ("tile", 32, 8, 0)),  # 48 KB devices
    ((32, 300, 4096, H100, True, True), ("tile", 32, 8, 0)),  # kinds without column tiles
    ((8, 300, 4096, H100, False, False), ("tile", 32, 8, 0)),  # strided sums over few columns: tile kernel
    ((1, 300, 64, H100, True, False), ("tile", 32, 8, 0)),  # 4 tiles cannot fill 132 SMs
    ((8, 16, 1000, H100, True, False), ("colreg", 256, 1, 0)),  # R <= 16: a thread per column
    ((8, 17, 1000, H100, True, False), ("cols", 16, 8, 0)),
    ((8, 16, 1000, H100, True, True), ("tile", 128, 2, 0)),  # kinds without column kernels
    ((1, 1 << 30, 1, H100, False, False), ("flat", 256, 1, 0)),  # a loss's mean over every value: row chunks
    ((16384, 20000, 1, H100, False, False), ("flat", 256, 1, 0)),  # reduce rows longer than KS_ROW_CAP
    ((64, 100_000, 1, H100, "layer_norm", False), ("tile", 1, 256, 0)),  # normalising long rows: tile + apply
    ((100, 16384, 1, H100, False, True), ("flat", 256, 1, 0)),  # rows the row kernels cannot read
]
_PATHS = {0: "row_warp", 1: "row_block", 2: "tile", 3: "cols", 4: "row_sub", 5: "colreg", 6: "colloop", 7: "flat"}


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_reduction_host_plan_picks_paths(tmp_path):
    from kernelstitch.agents.coder.codegen.common import SHARED_TYPES

    cases = ", ".join(f"{{{o}LL, {r}LL, {i}LL, {sms}, {smem}, {str(bool(n)).lower()}, "
                      f"{str(n is True).lower()}, {str(f).lower()}}}"
                      for (o, r, i, (sms, smem), n, f), _ in _PLAN_CASES)
    (tmp_path / "plan.cpp").write_text(SHARED_TYPES + """
#include <cstdio>
struct Case { long long outer, R, inner; int sms, smem; bool normalizing, rows32, force_tile; };
int main() {
  const Case cases[] = {""" + cases + """};
  for (const Case& c : cases) {
    const KsRedPlan p = ks_plan_reduction(c.outer, c.R, c.inner, c.sms, c.smem, 2, c.normalizing, c.rows32, c.force_tile);
    printf("%d %d %d %d\\n", p.path, p.threads_x, p.threads_y, p.row_values);
  }
}
""")
    subprocess.run(["nvcc", "-o", str(tmp_path / "plan"), str(tmp_path / "plan.cpp")], check=True,
                   capture_output=True, timeout=240)
    out = subprocess.run([str(tmp_path / "plan")], check=True, capture_output=True, text=True,
                         timeout=60).stdout.split()
    got = [(_PATHS[int(out[k])], int(out[k + 1]), int(out[k + 2]), int(out[k + 3]))
           for k in range(0, len(out), 4)]
    assert got == [want for _, want in _PLAN_CASES]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("g++") is None or cuda_include() is None,
                    reason="needs g++ and the CUDA headers (cuda_runtime_api.h)")
def test_bindings_type_check_against_torch_headers(tmp_path):
    """The host bindings of every kernel family (torch C++ API: ATen, c10/cuda) type-check with
    g++ against this CPU torch's headers.  CPU wheels lack one generated header of c10/cuda
    (build-time macros only); a stub stands in for it.  GEMM bindings need cublasLt.h, which
    this machine's CUDA may lack.  The GPU tests compile the same text for real."""
    flags = host_include_flags(tmp_path)
    if flags is None:
        pytest.skip("needs torch's c10/cuda headers")
    specs = elementwise_specs() + reduction_specs() + pool_specs() + batch_stats_specs() + batch_stats_merge_specs() + scan_specs() + mask_specs() + cat_specs() + arg_reduce_specs() + triangle_specs() + nll_specs() + conv_taps_specs() + attention_specs() + recurrent_specs()
    # copies but for the name: their bindings call the first one's launchers
    specs += [replace(specs[0], name="ew_alias"), replace(reduction_specs()[0], name="red_alias")]
    if (cuda_include() / "cublasLt.h").exists():
        specs += gemm_specs()
    cpp, _, names = build_extension_sources([emit(s) for s in specs])
    assert len(names) == len(specs)
    # main.cpp as load_inline(no_implicit_headers=True) writes it: the binding prelude's own
    # narrow includes must cover the bindings and load_inline's PYBIND11_MODULE block.
    assert "#include <torch/extension.h>" not in cpp
    module_def = "\n".join(["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"] + [
        f'm.def("{n}", torch::wrap_pybind_function({n}), "{n}");' for n in names] + ["}"])
    (tmp_path / "bindings.cpp").write_text(cpp + "\n" + module_def)
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=ks_test",
           "-DTORCH_API_INCLUDE_EXTENSION_H", *flags, str(tmp_path / "bindings.cpp")]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_fastdiv_matches_integer_division(tmp_path):
    """ks_fastdiv.h's multiply-shift division (the operand descriptors' per-element offsets)
    equals integer division for every divisor class: 1, powers of two and their neighbours,
    the large divisors near 2^32, and random pairs over the whole 32-bit numerator range."""
    from kernelstitch.agents.coder.codegen.templates import source

    (tmp_path / "fd.cpp").write_text(source("ks_fastdiv.h") + r"""
#include <cstdio>
#include <random>
int main() {
  std::mt19937_64 rng(7);
  long long bad = 0, checked = 0;
  auto check = [&](uint64_t d, uint32_t n) {
    const KsFastDiv f = ks_fastdiv_make((int64_t)d);
    if (f.m == 0 || ks_fastdiv_apply(n, f) != (uint32_t)(n / d)) ++bad;
    ++checked;
  };
  for (int s = 0; s < 32; ++s)
    for (int64_t dd = -1; dd <= 1; ++dd) {
      const int64_t d = ((int64_t)1 << s) + dd;
      if (d < 1) continue;
      for (uint32_t n : {0u, 1u, (uint32_t)d - 1u, (uint32_t)d, 0xffffffffu, 0xfffffffeu}) check(d, n);
      for (int k = 0; k < 2000; ++k) check(d, (uint32_t)rng());
    }
  for (uint64_t d : {3ull, 7ull, 16641ull, 123039ull, 0xfffffffeull, 0xffffffffull})
    for (int k = 0; k < 20000; ++k) check(d, (uint32_t)rng());
  for (int k = 0; k < 2000000; ++k) check(1 + rng() % 0xffffffffull, (uint32_t)rng());
  for (int k = 0; k < 200000; ++k) check(1 + rng() % 5000, (uint32_t)rng());
  const bool out_of_range = ks_fastdiv_make(0).m == 0 && ks_fastdiv_make((int64_t)1 << 32).m == 0;
  printf("%lld %lld %d\n", bad, checked, out_of_range ? 1 : 0);
}
""")
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(tmp_path / "fd"), str(tmp_path / "fd.cpp")],
                   check=True, capture_output=True, timeout=120)
    bad, checked, out_of_range = subprocess.run([str(tmp_path / "fd")], check=True, capture_output=True, text=True,
                                                timeout=60).stdout.split()
    assert (bad, out_of_range) == ("0", "1") and int(checked) > 2_000_000


# ks_offset's formulas (ks_prelude.cuh) on the host, for the g++ tests of ks_operand_read.h's predicates
_OFFSET_CPP = r"""
static int64_t offset(const KsOperand& d, int64_t i) {  // ks_offset's formulas (ks_prelude.cuh)
  switch (d.mode) {
    case KS_FULL: return i;
    case KS_SCALAR: return 0;
    case KS_ROW: return i % d.mod;
    default: return (i / d.div) % d.mod;
  }
}
"""


def _operand_read_program(tmp_path, main: str) -> list[int]:
    """The integers a g++ program prints: ks_operand_read.h's predicates, _OFFSET_CPP and `main`."""
    from kernelstitch.agents.coder.codegen.templates import source

    (tmp_path / "p.cpp").write_text(source("ks_shared_types.h") + source("ks_operand_read.h") + _OFFSET_CPP + main)
    cmd = ["g++", "-O1", "-std=c++17", f"-I{cuda_include()}", "-o", str(tmp_path / "p"), str(tmp_path / "p.cpp")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return [int(v) for v in subprocess.run([str(tmp_path / "p")], check=True, capture_output=True, text=True,
                                           timeout=60).stdout.split()]


@pytest.mark.skipif(shutil.which("g++") is None or cuda_include() is None,
                    reason="needs g++ and the CUDA headers (cuda_runtime_api.h)")
def test_column_affine_operands_read_base_plus_r_times_step(tmp_path):
    """ks_col_affine (ks_operand_read.h, the host's choice of the column kernels' base + r x step
    reads) against the offsets ks_offset computes: for every operand it accepts, at every (o, r, c)
    of small [outer, R, inner] views, the descriptor's offset equals the column's base plus r
    times ks_col_step's step (inner for full tensors, 1 for values per reduced index, else 0).
    Cases: full, scalar, per-channel (mod == R), per-(sample, channel) (mod == N x R: group
    statistics spread to [N, C, 1, 1]), per-column, and the rejected ones (mod not a multiple of R)."""

    accepted, rejected, bad, per_sample_channel = _operand_read_program(tmp_path, r"""
#include <cstdio>
#include <initializer_list>
static int64_t step(const KsOperand& d, int64_t inner) {  // ks_col_step's rule (ks_prelude.cuh)
  if (d.mode == KS_FULL) return inner;
  if ((d.mode == KS_CHANNEL || d.mode == KS_DIVMOD) && d.div == inner) return 1;
  return 0;
}
int main() {
  long long accepted = 0, rejected = 0, bad = 0, per_sample_channel = 0;
  for (int64_t outer = 1; outer <= 5; ++outer)
    for (int64_t R = 1; R <= 7; ++R)
      for (int64_t inner = 1; inner <= 6; ++inner) {
        KsOperand ds[12] = {};
        int n = 0;
        ds[n].mode = KS_FULL; ++n;
        ds[n].mode = KS_SCALAR; ++n;
        for (int64_t mod : {R, outer * R, 2 * R, R + 1, inner}) {
          ds[n].mode = KS_CHANNEL; ds[n].div = inner; ds[n].mod = mod; ++n;
        }
        ds[n].mode = KS_DIVMOD; ds[n].div = R * inner; ds[n].mod = outer; ++n;  // per sample
        ds[n].mode = KS_ROW; ds[n].mod = inner; ++n;  // per column position
        ds[n].mode = KS_ROW; ds[n].mod = inner + 1; ++n;
        for (int k = 0; k < n; ++k) {
          const KsOperand& d = ds[k];
          if (!ks_col_affine(d, R, inner)) { ++rejected; continue; }
          ++accepted;
          if (d.mode == KS_CHANNEL && d.div == inner && d.mod != R && d.div % (R * inner) != 0) ++per_sample_channel;
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t c = 0; c < inner; ++c) {
              const int64_t base = offset(d, o * R * inner + c);
              for (int64_t r = 0; r < R; ++r)
                if (offset(d, (o * R + r) * inner + c) != base + r * step(d, inner)) ++bad;
            }
        }
      }
  printf("%lld %lld %lld %lld\n", accepted, rejected, bad, per_sample_channel);
}
""")
    assert bad == 0 and accepted > 1000 and rejected > 100
    assert per_sample_channel > 100  # the [N, C, 1, 1] reads (mod a multiple of R, not R) are taken


@pytest.mark.skipif(shutil.which("g++") is None or cuda_include() is None,
                    reason="needs g++ and the CUDA headers (cuda_runtime_api.h)")
def test_strided_row_operands_read_a_base_a_row_plus_the_column(tmp_path):
    """ks_strided_rows (ks_operand_read.h: general strides the row kernels read as a base a row
    plus col, or the base alone) against the general-strides offset: for every [outer, R] view and
    strided operand [A, B, L] (strides (sa, sb, sl)) it accepts, every value of every row sits at
    the row's first value's offset plus col (sl == 1) or at it (sl == 0).  Cases: the per-(sample,
    channel) operand of a channels-last row view ((C, 0, 1): accepted), a broadcast row, a last
    dim not a row (L != R) or strided (sl == 2): rejected."""
    accepted, rejected, bad = _operand_read_program(tmp_path, r"""
#include <cstdio>
#include <initializer_list>
static int64_t general(const KsOperand& d, int64_t i) {  // ks_offset's KS_STRIDED loop
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) { off += (i % d.size[k]) * d.stride[k]; i /= d.size[k]; }
  return off;
}
int main() {
  long long accepted = 0, rejected = 0, bad = 0;
  for (int64_t a = 1; a <= 4; ++a)
    for (int64_t b = 1; b <= 5; ++b)
      for (int64_t L = 1; L <= 6; ++L)
        for (int64_t R : {L, L + 1, 2 * L}) {
          if ((a * b * L) % R) continue;
          const int64_t strides[4][3] = {{L, 0, 1}, {b * L, L, 1}, {1, 0, 0}, {b * 2 * L, 2 * L, 2}};
          for (const auto& st : strides) {
            KsOperand d = {};
            d.mode = KS_STRIDED; d.rank = 3;
            d.size[0] = a; d.size[1] = b; d.size[2] = L;
            for (int k = 0; k < 3; ++k) d.stride[k] = st[k];
            if (!ks_row_affine(d, R)) { ++rejected; continue; }
            ++accepted;
            for (int64_t row = 0; row < a * b * L / R; ++row) {
              const int64_t base = general(d, row * R);
              for (int64_t col = 0; col < R; ++col)
                if (general(d, row * R + col) != base + (d.stride[2] == 1 ? col : 0)) ++bad;
            }
          }
        }
  printf("%lld %lld %lld\n", accepted, rejected, bad);
}
""")
    assert bad == 0 and accepted > 100 and rejected > 100


@pytest.mark.skipif(shutil.which("g++") is None or cuda_include() is None,
                    reason="needs g++ and the CUDA headers (cuda_runtime_api.h)")
def test_per_channel_operands_of_four_planes_sit_at_four_consecutive_offsets(tmp_path):
    """ks_planes4_consecutive (ks_operand_read.h: the channels-last pools read a plane operand of
    their 4 channels as one 16-byte load) against ks_offset's formulas: for every operand it
    accepts, at every group of 4 planes plane0..plane0+3 (plane0 % 4 == 0) of small [N, C, S]
    inputs, plane plane0 + j's offset is plane0's plus j.  Accepted: per channel (mod == C) and
    per (sample, channel) (mod == N x C); rejected: full tensors, scalars, per-sample values,
    mods that are not a multiple of 4 and divisors other than the plane."""

    accepted, rejected, bad, channel = _operand_read_program(tmp_path, r"""
#include <cstdio>
#include <initializer_list>
int main() {
  long long accepted = 0, rejected = 0, bad = 0, channel = 0;
  for (int64_t N = 1; N <= 4; ++N)
    for (int64_t C = 4; C <= 24; C += 4)
      for (int64_t S = 1; S <= 9; ++S) {
        KsOperand ds[12] = {};
        int n = 0;
        ds[n].mode = KS_FULL; ++n;
        ds[n].mode = KS_SCALAR; ++n;
        for (int64_t mod : {C, N * C, C + 2, C / 2, (int64_t)2}) {
          ds[n].mode = KS_CHANNEL; ds[n].div = S; ds[n].mod = mod; ++n;
        }
        ds[n].mode = KS_DIVMOD; ds[n].div = C * S; ds[n].mod = N; ++n;  // per sample
        ds[n].mode = KS_CHANNEL; ds[n].div = 2 * S; ds[n].mod = C; ++n;  // not the plane's divisor
        ds[n].mode = KS_ROW; ds[n].mod = S; ++n;
        for (int k = 0; k < n; ++k) {
          const KsOperand& d = ds[k];
          if (!ks_planes4_consecutive(d, S)) { ++rejected; continue; }
          ++accepted;
          if (k == 2) ++channel;  // ds[2]: per channel (mod == C)
          for (int64_t plane0 = 0; plane0 < N * C; plane0 += 4)
            for (int64_t j = 0; j < 4; ++j)
              if (offset(d, (plane0 + j) * S) != offset(d, plane0 * S) + j) ++bad;
        }
      }
  printf("%lld %lld %lld %lld\n", accepted, rejected, bad, channel);
}
""")
    assert bad == 0 and accepted > 400 and rejected > 1000
    assert channel == 4 * 6 * 9  # every per-channel operand (mod == C) of every geometry is taken


def test_copies_that_differ_only_in_operand_names_share_one_binding_body():
    """An unrolled RNN's steps read differently named values: the bindings' messages differ,
    their code does not, so the copy forwards (its failed checks would name the first kernel)."""
    first = ScanSpec("ks_s2_cumsum", "sum", (TensorArg("h_0", "float32"),), 1, "float32")
    copy = ScanSpec("ks_s4_cumsum", "sum", (TensorArg("h_1", "float32"),), 1, "float32")
    kernels = [emit(first), emit(copy)]
    assert "(h_1)" in kernels[1].binding and "(h_0)" in kernels[0].binding
    cpp, cuda, _ = build_extension_sources(kernels)
    assert "at::Tensor ks_s4_cumsum(at::Tensor in_0) { return ks_s2_cumsum(in_0); }" in cpp
    assert "(h_1)" not in cpp and "ks_s4_cumsum_launch" not in cpp + cuda


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_flat_plan_chunks_cover_the_row_in_multiples_of_eight(tmp_path):
    """The flat path's chunks (KS_PATH_FLAT): a multiple of 8 values each (any 16-byte width starts
    aligned), together exactly the row, about 8 blocks an SM, none shorter than KS_FLAT_MIN_CHUNK
    unless the row is, and a workspace of one partial state per chunk and row."""
    from kernelstitch.agents.coder.codegen.common import SHARED_TYPES

    cases = [(1, 1 << 30), (1, 1_000_003), (3, 40_000), (2000, 20_000), (5, 17_000)]
    (tmp_path / "flat.cpp").write_text(SHARED_TYPES + """
#include <cstdio>
int main() {
  const long long cases[][2] = {""" + ", ".join(f"{{{o}LL, {r}LL}}" for o, r in cases) + """};
  for (const auto& c : cases) {
    const KsRedPlan p = ks_plan_reduction(c[0], c[1], 1, 132, 227 * 1024, 2, false, false, false);
    printf("%d %lld %lld %lld\\n", p.path, (long long)p.splits, (long long)p.r_per_split, (long long)p.workspace_floats);
  }
}
""")
    subprocess.run(["nvcc", "-o", str(tmp_path / "flat"), str(tmp_path / "flat.cpp")], check=True,
                   capture_output=True, timeout=240)
    out = subprocess.run([str(tmp_path / "flat")], check=True, capture_output=True, text=True, timeout=60).stdout
    for (outer, R), line in zip(cases, out.splitlines(), strict=True):
        path, splits, chunk, workspace = map(int, line.split())
        assert path == 7 and chunk % 8 == 0 and (splits - 1) * chunk < R <= splits * chunk, (outer, R, line)
        assert splits == 1 or chunk >= 16384, (outer, R, line)
        assert outer * splits <= 132 * 8 or splits == 1, (outer, R, line)
        assert workspace == (splits * outer * 2 if splits > 1 else 0), (outer, R, line)
    assert out.splitlines()[0].split()[1] == str(132 * 8)  # 2^30 values: 8 chunks an SM
