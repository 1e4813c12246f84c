"""Few-channel 2-D convolutions computed directly with their elementwise epilogue (planner/
direct_conv.py, coder/codegen/conv_epilogue.py; CPU): which convolutions the `conv-direct`
variant takes (with an elementwise chain or a pooling whose windows tile the output), its program against the module with every kernel interpreted in torch, the spec's
JSON, and the kernel through ptxas without spills."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import (
    ElementwiseOp,
    ElementwiseSpec,
    PoolSpec,
    TensorArg,
    emit,
)
from kernelstitch.agents.coder.codegen.conv_epilogue import (
    emit_conv_epilogue,
    persistent_smem,
    vector_copy_fits,
)
from kernelstitch.agents.plan.kernel_spec import (
    ConvEpilogueSpec,
    conv_epilogue_staged_channels,
    spec_from_json,
    spec_to_json,
)
from kernelstitch.agents.planner.capture import capture
from kernelstitch.agents.planner.variants import propose_variants
from spill_scope import NO_SPILLS, full_spill_check, nvcc_report, ptxas_kernels
from test_coder import interpreted_program


def module(cin: int, forward: str, conv: str = "nn.Conv2d(cin, 20, 3)", shape: str = "2, cin, 19, 37",
           extra_inputs: str = "") -> str:
    return textwrap.dedent(f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        cin = {cin}
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = {conv}
            def forward(self, x{", z" if extra_inputs else ""}):
                y = self.conv(x)
                return {forward}
        def get_inputs():
            return [torch.randn({shape}){", " + extra_inputs if extra_inputs else ""}]
    """)


def variant(tmp_path: Path, text: str, name: str = "conv-direct"):
    path = tmp_path / "problem.py"
    path.write_text(text)
    found = {v.name: v for v in propose_variants(capture(path), None)}
    return path, found.get(name)


@pytest.mark.parametrize("cin, conv, forward, extra", [
    (8, "nn.Conv2d(cin, 20, 3)", "F.mish(y - 0.5)", ""),  # level2/87's shape of chain, odd sizes
    (3, "nn.Conv2d(cin, 20, 3, stride=2, padding=1)", "torch.relu(F.hardswish(y))", ""),
    (4, "nn.Conv2d(cin, 20, (3, 5), padding=(1, 2))", "torch.tanh(y) * z", "torch.randn(2, 20, 19, 37)"),
    (8, "nn.Conv2d(cin, 40, 1)", "torch.sigmoid(y) + 1.0", ""),
    # pools whose windows tile the output (level2/82, 65): odd sizes drop the last partial window
    (8, "nn.Conv2d(cin, 40, 3)", "F.max_pool2d(torch.tanh(y) * 2.0 + 1.5, 4)", ""),
    (5, "nn.Conv2d(cin, 20, 3, padding=1)", "torch.sigmoid(F.avg_pool2d(y, (2, 8))).sum(dim=[1, 2, 3])", ""),
    (3, "nn.Conv2d(cin, 20, 3)", "F.max_pool2d(y, 2) * z", "torch.randn(2, 20, 8, 17)"),
])
def test_the_direct_program_matches_the_module(tmp_path, cin, conv, forward, extra):
    """The variant's program (the conv and its chain as one step) with every kernel interpreted
    in torch against the module: strides, padding, a rectangular kernel, a full-size operand."""
    path, direct = variant(tmp_path, module(cin, forward, conv, extra_inputs=extra))
    assert direct is not None
    steps = [s for s in direct.plan.steps if (s.spec or {}).get("type") == "conv_epilogue"]
    assert len(steps) == 1 and not any(s.technique == "library_call" for s in direct.plan.steps)
    assert steps[0].technique == "fused_convolution"  # compute-bound: not in the bandwidth metric
    assert not direct.plan.host.channels_last
    candidate = code_builtin(direct.plan, path, tmp_path / "out" / "model_new.py")
    assert "ks_layout_swap(" not in candidate.source.split("def _compute")[1]
    _, reference, new, inputs = interpreted_program(tmp_path, path, candidate)
    with torch.no_grad():
        torch.testing.assert_close(new(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("why, cin, conv, forward", [
    ("many input channels", 16, "nn.Conv2d(cin, 20, 3)", "torch.relu(y)"),
    ("read twice", 8, "nn.Conv2d(cin, 20, 3)", "torch.relu(y) + torch.amax(y, dim=1, keepdim=True)"),
    ("returned", 8, "nn.Conv2d(cin, 20, 3, bias=False)", "(y, torch.relu(y))"),
    ("dilated", 8, "nn.Conv2d(cin, 20, 3, dilation=2)", "torch.relu(y)"),
    ("grouped", 8, "nn.Conv2d(cin, 20, 3, groups=4)", "torch.relu(y)"),
    ("followed by a reduction", 8, "nn.Conv2d(cin, 20, 3)", "torch.sum(y, dim=1)"),
    ("overlapping pool windows", 8, "nn.Conv2d(cin, 20, 3)", "F.max_pool2d(y, 3, 2)"),
    ("a view of it read too", 8, "nn.Conv2d(cin, 20, 3, bias=False)", "(torch.relu(y), y.flatten(1))"),
    ("a view of it reduced", 8, "nn.Conv2d(cin, 20, 3, bias=False)",
     "(torch.tanh(y), y.view(2, 20, -1).amax(dim=2))"),
    ("a pool window taller than the block's rows", 8, "nn.Conv2d(cin, 20, 3)", "F.max_pool2d(y, (16, 2))"),
])
def test_convolutions_the_direct_kernel_does_not_take(tmp_path, why, cin, conv, forward):
    """(A biased conv's output returned beside its chain is taken: the chain stores it.)"""
    _, direct = variant(tmp_path, module(cin, forward, conv))
    assert direct is None, why


def test_the_spec_round_trips_and_stages_what_fits():
    ew = ElementwiseSpec(name="e", inputs=(TensorArg("b", "float32"), TensorArg("y", "float32")),
                         ops=(ElementwiseOp("add", ("y", "b"), "t"), ElementwiseOp("relu", ("t",), "o")),
                         outputs=("o",), out_dtype="float32")
    spec = ConvEpilogueSpec("ks_s1_conv_epilogue", TensorArg("x", "float32"), TensorArg("w", "float32"),
                            (3, 3), (1, 1), (1, 1), ew, operand=1, ci_tile=8)
    assert spec_from_json(spec_to_json(spec)) == spec
    assert emit(spec).python_args == ("x", "w", "b")  # the conv's output is no argument
    assert conv_epilogue_staged_channels((3, 3), (1, 1), 8) == 8
    assert conv_epilogue_staged_channels((3, 3), (1, 1), 3) == 3
    # 7 x 7 at stride 2: a 21 x 69 input tile and 49 x 36 weights (rows padded) a channel, 12.9 KB: 3 fit 48 KB
    assert conv_epilogue_staged_channels((7, 7), (2, 2), 8) == 3
    # 4 x 4 at stride 3: a 25 x 97 tile and 16 x 36 weights, 12.0 KB a channel: 4 fit (rows padded
    # to 100 for the 16-byte copies would fit 3; the planner's sizing counts them unpadded)
    assert conv_epilogue_staged_channels((4, 4), (3, 3), 8) == 4


def test_the_16_byte_copies_are_taken_only_where_they_fit():
    """vector_copy=True falls back to the 4-byte copies (if constexpr (false)) where a padded row
    has more than 32 chunks (5 x 5 at stride 4: 129 floats) or the padded tile overflows the
    block-a-tile kernel's 48 KB (4 x 4 at stride 3, 4 channels); level 2's 3 x 3 takes them."""
    def spec(kernel, stride, ci):
        return ConvEpilogueSpec("c", TensorArg("x", "float32"), TensorArg("w", "float32"), kernel, stride, (0, 0),
                                nvcc_specs()[1].epilogue, 0, ci)
    taken = "  if constexpr ({}) {{\n    // 16-byte copies"
    for geometry, fits in ((((3, 3), (1, 1), 8), True), (((5, 5), (4, 4), 2), False), (((4, 4), (3, 3), 4), False)):
        assert vector_copy_fits(spec(*geometry)) is fits
        cuda = emit_conv_epilogue(spec(*geometry), vector_copy=True).cuda
        assert taken.format("true" if fits else "false") in cuda, geometry
    assert taken.format("false") in emit_conv_epilogue(spec((3, 3), (1, 1), 8)).cuda  # off by default


def nvcc_specs() -> list[ConvEpilogueSpec]:
    full = ElementwiseSpec(name="e", inputs=(TensorArg("y", "float32"), TensorArg("b", "float32"),
                                             TensorArg("z", "float32")),
                           ops=(ElementwiseOp("add", ("y", "b"), "t"), ElementwiseOp("mish", ("t",), "u"),
                                ElementwiseOp("mul", ("u", "z"), "o")),
                           outputs=("u", "o"), out_dtype="float32")
    one = ElementwiseSpec(name="e", inputs=(TensorArg("y", "float32"),),
                          ops=(ElementwiseOp("relu", ("y",), "o"),), outputs=("o",), out_dtype="float32")
    geometry = [((3, 3), (1, 1), (0, 0)), ((3, 3), (2, 2), (1, 1)), ((1, 1), (1, 1), (0, 0)), ((5, 5), (1, 1), (2, 2))]
    return [ConvEpilogueSpec(f"ks_c{i}_{j}", TensorArg("x", "float32"), TensorArg("w", "float32"), k, s, p, ew, 0,
                             conv_epilogue_staged_channels(k, s, 8))
            for i, (k, s, p) in enumerate(geometry) for j, ew in enumerate((full, one, *pool_specs()))]


def pool_specs() -> list[PoolSpec]:
    """level2/82's max pool (prologue tanh * 2 + plane bias) and an avg pool with an epilogue operand."""
    f32 = lambda n: TensorArg(n, "float32")  # noqa: E731
    return [
        PoolSpec("p", "max", (f32("y"), f32("cb"), f32("b")), 2, "float32", kernel=(4, 4), stride=(4, 4),
                 padding=(0, 0), dilation=(1, 1),
                 prologue=(ElementwiseOp("add", ("y", "cb"), "t"), ElementwiseOp("tanh", ("t",), "u"),
                           ElementwiseOp("mul", ("u", 2.0), "v"), ElementwiseOp("add", ("v", "b"), "o")),
                 prologue_out="o", plane_inputs=("cb", "b")),
        PoolSpec("p", "avg", (f32("y"), f32("z")), 2, "float32", kernel=(2, 8), stride=(2, 8), padding=(0, 0),
                 epilogue=(ElementwiseOp("sigmoid", ("acc",), "s"), ElementwiseOp("mul", ("s", "z"), "o")),
                 epilogue_out="o", epilogue_inputs=("z",)),
    ]


def test_the_persistent_kernel_is_launched_only_where_3_blocks_fit_an_sm():
    """3 x 3 at stride 1 (level 2's convolutions): weights, two input tiles and the accumulators,
    65 KB; a 5 x 5 at 8 staged channels needs more than a third of H100's 227 KB, so its launcher
    keeps the block-a-tile kernel; persistent=False keeps it everywhere."""
    k3, _, _, k5 = (s for s in nvcc_specs() if s.name.endswith("_1"))
    assert persistent_smem(k3) == 4 * (8 * 9 * 36 + 2 * 8 * 10 * 34 + 4 * 8 * 8 * 32)
    assert persistent_smem(k5) > 227 * 1024 // 3
    launch = "if ({} && Cin <= "
    assert launch.format("true") in emit_conv_epilogue(k3).cuda
    assert launch.format("false") in emit_conv_epilogue(k5).cuda
    assert launch.format("false") in emit_conv_epilogue(k3, persistent=False).cuda
    # the shared-memory opt-in and the occupancy are per device (ks_device_slot): the prelude's
    # ks_smem_opt_in, which reduction/cols_launch.cu's launcher takes too
    cuda = emit_conv_epilogue(k3).cuda
    assert "ks_smem_opt_in(ks_c0_1_persistent, (int)ks_c0_1_PERSISTENT_SMEM, opted_in)" in cuda
    assert "opted[dev] = cudaFuncSetAttribute(kernel," in cuda and "if (per_sm[dev] == 0)" in cuda


@pytest.mark.nvcc
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_kernel_compiles_without_spills():
    """ptxas -v, sm_90a, -O3 (nvcc 13.0, 2026-12-07): both kernels of every spec within the
    3-blocks-an-SM bound of 4 warps (170 registers) without stack or spills: 145-168 registers
    for the block-a-tile kernel, 108-168 for the persistent one (all 16 specs with
    KERNELSTITCH_SPILL_CHECK=all); the 16-byte row copies (vector_copy=True, suffix _vec) too."""
    specs = nvcc_specs()
    if not full_spill_check():  # CI (2 cores): the heaviest chain and a pooled store
        specs = [s for s in specs if s.name in ("ks_c0_0", "ks_c0_2")]
    vector = [replace(s, name=f"{s.name}_vec") for s in specs if s.stride == (1, 1)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conv_epilogue.cu"
        path.write_text("\n".join([*(emit(s).cuda for s in specs),
                                   *(emit_conv_epilogue(s, vector_copy=True).cuda for s in vector)]))
        flags = ["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-Xptxas", "-v", "-cubin", "-o", "/dev/null"]
        rc, log = nvcc_report(flags, path, timeout_s=800)
    assert rc == 0, log[-4000:]
    report = ptxas_kernels(log)
    # every spec compiles both kernels (the launcher takes the persistent one where it may)
    assert sorted(report) == sorted(f"{s.name}_{k}" for s in [*specs, *vector] for k in ("tiles", "persistent")), report
    assert not {k: v for k, v in report.items() if v[1] != NO_SPILLS}, report
