"""Loads in flight in the SASS of the memory-bound kernels whose loads were found serialized
(kernelstitch.bench.sass_loads; CPU: nvcc for sm_90a and nvdisasm, no GPU)."""

from __future__ import annotations

import shutil

import pytest
from kernelstitch.agents.coder.codegen import ElementwiseOp as E
from kernelstitch.agents.coder.codegen import ElementwiseSpec, ReductionSpec, TensorArg, emit

from kernelstitch.bench.preflight import CUDA_DIR
from kernelstitch.bench.sass_loads import KernelLoads, kernel_loads, loads_in_flight, nvdisasm

CUDA = CUDA_DIR
needs_tools = pytest.mark.skipif(shutil.which("nvcc") is None or nvdisasm() is None,
                                 reason="needs nvcc and nvdisasm (the dev extras' nvidia-cuda-nvdisasm)")

# nvdisasm -c's layout: a function header, then /*offset*/ instructions
_SASS = """
//--------------------- .text.serial --------------------------
        /*0000*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;
        /*0010*/                   FADD R3, R2, 1 ;
        /*0020*/                   STG.E desc[UR4][R6.64], R3 ;
        /*0030*/                   LDG.E.CONSTANT R8, desc[UR4][R4.64+0x4] ;
        /*0040*/                   FADD R9, R8, 1 ;
//--------------------- .text.batched --------------------------
        /*0000*/                   LDG.E.128.CONSTANT R8, desc[UR4][R4.64] ;
        /*0010*/              @!P0 LDG.E.CONSTANT R12, desc[UR4][R4.64+0x10] ;
        /*0020*/                   LDG.E.CONSTANT R13, desc[UR4][R4.64+0x20] ;
        /*0030*/                   FADD R20, R11, R12 ;
        /*0040*/                   STS [R21], R13 ;
"""


def test_the_analysis_counts_the_loads_pending_at_each_first_use():
    serial, batched = loads_in_flight(_SASS)
    assert serial == KernelLoads("serial", (1, 1))
    # R11 (the 16-byte load's last register) and R12 are read together: 3 pending, then R13 alone
    assert batched.kernel == "batched" and batched.in_flight == (3, 3, 1) and batched.most == 3


def _gn_spec() -> ReductionSpec:
    """group_norm after a conv as the planner writes it: bias and GELU before, affine, an epilogue."""
    args = (TensorArg("x", "float32"), TensorArg("cb", "float32"), TensorArg("w", "float32"),
            TensorArg("bb", "float32"), TensorArg("e", "float32"))
    return ReductionSpec("gn", "group_norm", args, dim=1, keepdim=False, out_dtype="float32", groups=8, weight="w",
                         bias="bb", prologue=(E("add", ("x", "cb"), "p"), E("gelu", ("p",), "g")), prologue_out="g",
                         epilogue=(E("mul", ("acc", "e"), "o"),), epilogue_out="o", epilogue_inputs=("e",),
                         trailing=True, keep_channels_last=True)


def _most(kernels: list[KernelLoads], part: str) -> dict[str, int]:
    found = {k.demangled(): k.most for k in kernels if part in k.kernel}
    assert found, [k.kernel for k in kernels]
    return found


@needs_tools
def test_the_group_norm_apply_issues_all_its_slots_before_using_one():
    """Every instantiation (one lane a channel, or a warp over 2 / 4 positions; stored NCHW or
    kept NHWC) has its 16 slots' loads in flight (the `slotloads` knob's form, slot by slot,
    had at most 7 in the same analysis)."""
    batched = _most(kernel_loads(emit(_gn_spec()).cuda, (CUDA,)), "gn_nhwc_apply")
    assert len(batched) == 6 and min(batched.values()) >= 16, batched


@needs_tools
def test_the_channels_last_elementwise_kernels_keep_16_loads_in_flight():
    """The narrow (fewer than 32 channels) kernel loads into registers before its shared tile."""
    args = (TensorArg("x", "float32"), TensorArg("m", "float32"), TensorArg("r", "float32"))
    spec = ElementwiseSpec("ew", args, (E("mul", ("x", "m"), "t"), E("add", ("t", "r"), "u"), E("gelu", ("u",), "y")),
                           ("y",), "float32")
    most = _most(kernel_loads(emit(spec).cuda, (CUDA,)), "_nhwc")
    assert all(v >= 16 for v in most.values()), most


@needs_tools
def test_the_channels_last_softmax_stages_8_positions_at_a_time():
    """softmax over the channels of an NHWC input: 8 positions' loads before their prologue and
    shared stores (one at a time held one load in flight)."""
    spec = ReductionSpec("sm", "softmax", (TensorArg("x", "float32"), TensorArg("b", "float32")), dim=1,
                         keepdim=False, out_dtype="float32", prologue=(E("add", ("x", "b"), "p"),), prologue_out="p")
    most = _most(kernel_loads(emit(spec).cuda, (CUDA,)), "softmax_nhwc")
    assert all(v >= 8 for v in most.values()), most
