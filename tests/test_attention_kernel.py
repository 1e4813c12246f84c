"""The flash-attention kernel's planning and emission on the CPU (its GPU behaviour:
tests/test_attention_gpu.py): which scaled_dot_product_attention calls it takes (and why the
others stay PyTorch's call), the spec's JSON round trip, the emitter's refusals and tile choice."""

from __future__ import annotations

import math
import textwrap

import pytest
from kernelstitch.agents.coder.codegen import AttentionSpec, TensorArg, emit
from kernelstitch.agents.coder.codegen.attention import (
    block_keys,
    mma_kind,
    row_tiles,
    rows_per_thread,
)
from kernelstitch.agents.plan.kernel_spec import spec_from_json, spec_to_json
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture

# head dims fixed by the module (views with constants): a free [.., D] input's head dim is a
# symbol the Verifier may vary, and the kernel is compiled for one head dim
SDPA = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(48, 3 * {e}), nn.Linear(48, 3 * {e}), nn.Linear(48, 3 * {ev})

    def forward(self, x{mask_param}):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 3, {e}).transpose(1, 2)
        k = self.k(x).view(b, t, 3, {e}).transpose(1, 2)
        v = self.v(x).view(b, t, 3, {ev}).transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v{call})

def get_inputs():
    return [torch.randn(2, 17, 48){mask_input}]

def get_init_inputs():
    return []
'''


def _plan(tmp_path, call="", e=64, ev=None, mask=None):
    text = SDPA.format(call=call, e=e, ev=ev or e, mask_param=", m" if mask else "",
                       mask_input=f", {mask}" if mask else "")
    path = tmp_path / "problem.py"
    path.write_text(textwrap.dedent(text))
    return plan_builtin(capture(path))


def _attention(plan):
    return [s for s in plan.steps if s.technique == "fused_attention"
            or (s.spec or {}).get("op") == "aten.scaled_dot_product_attention.default"]


@pytest.mark.parametrize("call, mask, causal, masked, scale", [
    ("", None, False, False, 1 / math.sqrt(64)),
    (", is_causal=True", None, True, False, 1 / math.sqrt(64)),
    (", attn_mask=m, scale=0.5", "torch.rand(17, 17) > 0.3", False, True, 0.5),
    (", m", "torch.randn(2, 1, 17, 17)", False, True, 1 / math.sqrt(64)),
], ids=["plain", "causal", "bool_mask_scale", "additive_mask"])
def test_sdpa_calls_the_kernel_takes(tmp_path, call, mask, causal, masked, scale):
    steps = _attention(_plan(tmp_path, call, mask=mask))
    assert [s.technique for s in steps] == ["fused_attention"]
    spec = steps[0].spec
    assert spec["causal"] is causal and (spec["mask"] is not None) is masked
    assert spec["head_dim"] == 64 and spec["scale"] == pytest.approx(scale)
    assert len(steps[0].inputs) == 3 + masked
    # causal: about half of the q k^T and p v work
    full = 4 * 2 * 3 * 17 * 64 * 17
    assert steps[0].estimated_flops == (full // 2 if causal else full)


@pytest.mark.parametrize("call, e, ev", [
    (", dropout_p=0.1", 64, None),  # random: not ours
    ("", 256, None),                # head dim beyond the kernel's tiles
    ("", 64, 32),                   # the value's head dim differs from the key's
], ids=["dropout", "head_dim_256", "value_head_dim_differs"])
def test_sdpa_calls_left_to_pytorch(tmp_path, call, e, ev):
    steps = _attention(_plan(tmp_path, call, e=e, ev=ev))
    assert [s.technique for s in steps] == ["library_call"]


def test_the_spec_round_trips_and_the_emitter_refuses_what_the_kernel_cannot_do():
    spec = AttentionSpec("ks_s1_attention", TensorArg("q", "bfloat16"), TensorArg("k", "bfloat16"),
                         TensorArg("v", "bfloat16"), 96, 0.125, "bfloat16", True, TensorArg("m", "bool"))
    assert spec_from_json(spec_to_json(spec)) == spec
    source = emit(spec)
    assert source.python_args == ("q", "k", "v", "m")
    assert "constexpr bool CAUSAL = true;" in source.cuda and "constexpr int MASK = 1;" in source.cuda
    # bf16 inputs: the tensor-core kernel in their own math
    assert "constexpr int DP = 96;" in source.cuda and "constexpr int KIND = 2;" in source.cuda
    assert "at::Tensor mask" in source.binding
    with pytest.raises(ValueError, match="head dim 272"):
        emit(AttentionSpec("a", spec.query, spec.key, spec.value, 272, 0.1, "bfloat16"))
    f32 = TensorArg("q", "float32")
    with pytest.raises(ValueError, match="head dim 160 outside 1..128"):  # strict fp32: the FMA kernel's tiles
        emit(AttentionSpec("a", f32, f32, f32, 160, 0.1, "float32"))
    tf32 = AttentionSpec("a", f32, f32, f32, 160, 0.1, "float32", precision="tf32")
    assert spec_from_json(spec_to_json(tf32)) == tf32
    assert "constexpr int KIND = 0;" in emit(tf32).cuda
    with pytest.raises(ValueError, match="dtypes"):
        emit(AttentionSpec("a", TensorArg("q", "float32"), spec.key, spec.value, 64, 0.1, "float32"))


@pytest.mark.parametrize("head, rows", [(16, 8), (32, 8), (48, 4), (64, 8), (80, 4), (128, 4)])
def test_query_rows_a_thread_follow_the_register_budget(head, rows):
    assert rows_per_thread(head) == rows
    assert rows_per_thread(head, additive_mask=True) == 4  # ptxas spilled 8 rows with an added mask
    spec = AttentionSpec("a", TensorArg("q", "float32"), TensorArg("k", "float32"), TensorArg("v", "float32"),
                         head, 0.1, "float32")
    assert f"constexpr int RM = {rows};" in emit(spec).cuda
    assert f"constexpr int DP = {-(-head // 16) * 16};" in emit(spec).cuda


@pytest.mark.parametrize("dtype, precision, kind", [
    ("float32", "fp32", None), ("float32", "tf32", 0), ("float32", "fp16", 1), ("float32", "bf16", 2),
    ("float16", "fp32", 1), ("bfloat16", "fp32", 2), ("bfloat16", "tf32", 2), ("float16", "bf16", 1),
])
def test_the_kernel_body_follows_the_inputs_and_the_precision(dtype, precision, kind):
    # strict fp32 stays on the FMA units; 16-bit inputs keep their own math whatever the opt-in
    assert mma_kind(dtype, precision) == kind
    t = TensorArg("q", dtype)
    cuda = emit(AttentionSpec("a", t, t, t, 64, 0.1, dtype, precision=precision)).cuda
    if kind is None:
        assert "constexpr int RM =" in cuda and "mma.sync" not in cuda
    else:
        assert f"constexpr int KIND = {kind};" in cuda and "mma.sync" in cuda and "constexpr int RM =" not in cuda
    assert cuda.count("_launch(") == 1  # one launcher (launch.cu) under either body


@pytest.mark.parametrize("head, keys", [(16, 64), (128, 64), (136, 32), (256, 32)])
def test_the_tensor_core_kernel_takes_key_tiles_of_32_above_head_dim_128(head, keys):
    assert block_keys(head) == keys
    t = TensorArg("q", "float16")
    assert f"BN = {keys};" in emit(AttentionSpec("a", t, t, t, head, 0.1, "float16")).cuda


@pytest.mark.parametrize("head, masked, tiles", [(16, False, 2), (32, False, 2), (32, True, 1), (64, False, 1),
                                                 (128, False, 1), (256, True, 1)])
def test_warps_of_the_tensor_core_kernel_take_two_row_tiles_at_small_unmasked_heads(head, masked, tiles):
    # two m16 tiles a warp halve the shared-memory reads per product; measured to pay at head
    # dim 32 unmasked only (a mask or causal limit took the registers to 233 at head dim 64)
    assert row_tiles(head, masked) == tiles
    t = TensorArg("q", "bfloat16")
    source = emit(AttentionSpec("a", t, t, t, head, 0.1, "bfloat16", causal=masked))
    assert f"constexpr int MT = {tiles};" in source.cuda
    assert f"{64 * tiles} query rows a block of 4 warps" in source.notes[1]
