"""Built-in planner: which nodes fuse, which stay, rewrites, host settings, plan JSON."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from kernelstitch.agents.plan import Plan, PlanError, render_plan_markdown
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def plan_of(path: Path, module: str | None = None, **kw) -> Plan:
    return plan_builtin(capture(path, module), **kw)


def write(tmp_path: Path, forward: str, inputs: str, init: str = "", name="p.py") -> Path:
    body = f"""
import torch
import torch.nn as nn
import torch.nn.functional as F
class Model(nn.Module):
    def __init__(self):
        super().__init__()
{textwrap.indent(textwrap.dedent(init), ' ' * 8) if init else ''}
    def forward(self, x):
{textwrap.indent(textwrap.dedent(forward), ' ' * 8)}
def get_inputs():
    return {inputs}
"""
    path = tmp_path / name
    path.write_text(body)
    return path


def techniques(plan: Plan) -> list[str]:
    return [s.technique for s in plan.steps]


def test_elementwise_chain_is_one_kernel():
    plan = plan_of(EXAMPLES / "elementwise_chain.py")
    (step,) = plan.steps
    assert step.technique == "fused_elementwise"
    assert step.nodes == ["mul", "add", "relu", "mul_1", "clamp"]
    assert step.spec["type"] == "elementwise" and step.inputs == ["x"]
    assert [o["op"] for o in step.spec["ops"]] == ["mul", "add", "relu", "mul", "clamp"]
    assert step.source_lines == [26, 27, 28, 29] or len(step.source_lines) >= 3


def test_softmax_with_scale_prologue():
    (step,) = plan_of(EXAMPLES / "softmax_temperature.py").steps
    assert step.technique == "fused_reduction"
    assert step.spec["kind"] == "softmax" and [o["op"] for o in step.spec["prologue"]] == ["div"]
    assert step.spec["prologue_out"] == "div" and step.nodes == ["div", "softmax"]


@pytest.mark.parametrize("forward, trailing", [
    ("return torch.softmax(x, dim=-1)", True), ("return torch.softmax(x, dim=3)", True),
    ("return torch.softmax(x, dim=1)", False), ("return x.sum(dim=(2, 3))", True),
    ("return x.sum(dim=(1, 2))", False), ("return F.layer_norm(x, (5,))", True),
    ("return self.gn(x)", True)])
def test_reductions_over_the_last_dims_are_marked_trailing(tmp_path, forward, trailing):
    """inner == 1 for every shape of the captured rank: the coder leaves the column kernels out."""
    from kernelstitch.agents.coder.codegen import emit
    from kernelstitch.agents.plan.kernel_spec import spec_from_json

    path = write(tmp_path, forward, "[torch.randn(2, 4, 3, 5)]", "self.gn = nn.GroupNorm(2, 4)")
    (step,) = plan_of(path).steps
    assert step.technique == "fused_reduction" and step.spec["trailing"] is trailing
    cuda = emit(spec_from_json(step.spec)).cuda
    name = step.spec["name"]
    assert (f"{name}_colloop" in cuda) is not trailing and (f"{name}_tile" in cuda)
    binding = emit(spec_from_json(step.spec)).binding
    assert ("built without column kernels" in binding) is trailing


def test_linear_bias_relu_is_a_gemm_epilogue(tmp_path):
    path = write(tmp_path, "return torch.relu(self.fc(x))", "[torch.randn(8, 16)]",
                 "self.fc = nn.Linear(16, 32)")
    (step,) = plan_of(path).steps
    assert step.technique == "gemm_epilogue"
    assert step.spec["activation"] == "relu" and step.spec["bias"]["name"] == "p_fc_bias"
    assert step.spec["weight_layout"] == "nk"


def test_exact_gelu_stays_out_of_the_cublaslt_epilogue():
    steps = plan_of(EXAMPLES / "linear_bias_gelu.py").steps
    assert techniques_list(steps) == ["gemm_epilogue", "fused_elementwise"]
    assert steps[0].spec["activation"] == "none" and steps[0].spec["bias"] is not None
    assert steps[1].spec["ops"][0]["op"] == "gelu" and steps[1].inputs == [steps[0].outputs[0]]


def techniques_list(steps):
    return [s.technique for s in steps]


def test_tanh_gelu_goes_into_the_epilogue(tmp_path):
    path = write(tmp_path, "return F.gelu(self.fc(x), approximate='tanh')", "[torch.randn(8, 16)]",
                 "self.fc = nn.Linear(16, 32)")
    (step,) = plan_of(path).steps
    assert step.spec["activation"] == "gelu_tanh"


def test_matmul_bias_add_fuses_when_no_bias(tmp_path):
    path = write(tmp_path, "return torch.matmul(x, self.w) + self.b",
                 "[torch.randn(8, 16)]",
                 "self.w = nn.Parameter(torch.randn(16, 32))\nself.b = nn.Parameter(torch.randn(32))")
    (step,) = plan_of(path).steps
    assert step.technique == "gemm_epilogue" and step.spec["weight_layout"] == "kn"
    assert step.spec["bias"]["name"] == "p_b"


def test_conv_is_a_library_call_with_bias_in_the_epilogue():
    plan = plan_of(EXAMPLES / "conv2d_bias_relu.py")
    assert techniques(plan) == ["library_call", "fused_elementwise"]
    conv, epi = plan.steps
    assert conv.spec["declare"]["aten::cudnn_convolution"] == "library_call"
    assert [o["op"] for o in epi.spec["ops"]] == ["add", "relu", "mul", "add"]
    graph = plan.graph
    assert graph.node(conv.nodes[0]).args[2] is None  # cuDNN runs without the bias
    assert plan.host.channels_last and any("channels_last on" in r for r in plan.host.reasons)


def test_channels_last_only_for_2d_convolutions(tmp_path):
    path = write(tmp_path, "return torch.relu(self.conv(x))", "[torch.randn(2, 4, 32)]",
                 "self.conv = nn.Conv1d(4, 8, 3)")
    plan = plan_of(path)
    assert techniques(plan)[0] == "library_call"
    assert not plan.host.channels_last and any("channels_last off" in r for r in plan.host.reasons)


def test_unsupported_op_is_a_named_fallback(tmp_path):
    path = write(tmp_path, "return torch.flip(x * 2.0, [1]) + 1.0", "[torch.randn(8, 16)]")
    plan = plan_of(path)
    assert techniques(plan) == ["fused_elementwise", "pytorch_fallback", "fused_elementwise"]
    fb = plan.steps[1]
    assert fb.spec["declare"] == {"aten::flip": "pytorch_fallback"}
    assert any("flip" in n and "stays in PyTorch" in n for n in plan.notes)
    assert not plan.host.cuda_graph


def test_shared_intermediate_is_materialised_once(tmp_path):
    path = write(tmp_path, "y = torch.sigmoid(x * 3.0)\nreturn y + 1.0, torch.flip(y, [1])",
                 "[torch.randn(8, 16)]")
    plan = plan_of(path)
    assert techniques(plan) == ["fused_elementwise", "pytorch_fallback"]
    first = plan.steps[0]
    assert first.outputs == ["sigmoid", "add"]  # two outputs of one pass
    assert plan.steps[1].inputs == ["sigmoid"]


def test_reduction_recomputes_a_shared_elementwise_input(tmp_path):
    path = write(tmp_path, "y = torch.sigmoid(x * 3.0)\nreturn y + 1.0, y.amax(dim=-1)",
                 "[torch.randn(8, 16)]")
    plan = plan_of(path)
    assert techniques(plan) == ["fused_elementwise", "fused_reduction"]
    assert plan.steps[0].outputs == ["add"]  # y itself is never stored
    assert [o["op"] for o in plan.steps[1].spec["prologue"]] == ["mul", "sigmoid"]
    assert plan.steps[1].inputs == ["x"]


def test_reduction_epilogue_and_recomputed_prologue():
    plan = plan_of(EXAMPLES / "user_style" / "fused_norm.py")
    red, ew = plan.steps
    assert red.technique == "fused_reduction" and red.spec["kind"] == "mean"
    assert [o["op"] for o in red.spec["epilogue"]] == ["add", "rsqrt"]
    assert [o["op"] for o in red.spec["prologue"]] == ["add", "square"]
    assert red.inputs == ["x", "residual"]  # h = x + r recomputed, never stored
    assert ew.inputs[:2] == ["x", "residual"] and ew.outputs == ["mul_1"]


def test_an_epilogue_operand_made_from_the_prologue_inputs_joins_only_when_stored_anyway(tmp_path):
    """fusion.computed_from: a residual computed from the reduction's own input stays out of
    its epilogue when the epilogue is its only reader (the add then joins the residual's kernel:
    level2/92's bias add), and joins it when the residual is returned anyway (refusing would
    write the group_norm's result as one more tensor)."""
    init = "self.norm = nn.GroupNorm(4, 16)"
    inputs = "[torch.randn(2, 16, 8, 8)]"
    alone = plan_of(write(tmp_path, "a = torch.relu(x * 2.0)\nreturn self.norm(x) + a", inputs, init, "a.py"))
    stored = plan_of(write(tmp_path, "a = torch.relu(x * 2.0)\nreturn self.norm(x) + a, a", inputs, init, "b.py"))
    norm_alone = next(st for st in alone.steps if st.technique == "fused_reduction")
    norm_stored = next(st for st in stored.steps if st.technique == "fused_reduction")
    assert not norm_alone.spec["epilogue"] and norm_alone.outputs == ["group_norm"]
    assert [o["op"] for o in norm_stored.spec["epilogue"]] == ["add"]
    assert techniques(stored) == ["fused_elementwise", "fused_reduction"]


def test_linear_sum_rewrite(tmp_path):
    path = write(tmp_path, "return self.fc(x).sum(dim=-1)", "[torch.randn(8, 16)]",
                 "self.fc = nn.Linear(16, 32)")
    plan = plan_of(path)
    assert set(techniques(plan)) == {"algebraic_rewrite"}
    assert not any(s.spec["type"] == "gemm" for s in plan.steps)
    assert any("rewritten" in n for n in plan.notes) and plan.graph_edits


def test_host_settings_cuda_graph_when_launch_bound(tmp_path):
    path = write(tmp_path, "y = torch.softmax(x, dim=-1)\nreturn torch.flip(y, [1]).exp()",
                 "[torch.randn(8, 16)]")
    assert not plan_of(path).host.cuda_graph  # fallback present
    small = plan_of(EXAMPLES / "mlp.py", None) if False else None
    mlp_small = plan_builtin(capture(EXAMPLES / "mlp.py", constants={
        "BATCH": 8, "IN_FEATURES": 16, "HIDDEN": 32, "OUT_FEATURES": 8}))
    assert mlp_small.host.cuda_graph and "launch-bound" in mlp_small.host.reasons[0]
    assert not plan_of(EXAMPLES / "mlp.py").host.cuda_graph  # GB moved: not launch-bound
    assert small is None


def test_estimates_from_shapes():
    plan = plan_of(EXAMPLES / "big_gemm.py")
    (step,) = plan.steps
    assert step.estimated_flops == 2 * 8192**3
    assert step.estimated_bytes == 3 * 8192 * 8192 * 4


def test_gemm_without_kernels_is_a_library_call():
    plan = plan_of(EXAMPLES / "mlp.py", gemm_kernels=False)
    assert techniques(plan) == ["library_call", "fused_elementwise", "library_call"]
    assert "aten::addmm" in plan.steps[0].spec["declare"]


def test_plan_json_round_trip_and_markdown():
    plan = plan_of(EXAMPLES / "residual_block.py")
    again = Plan.from_json(json.loads(plan.dumps()))
    assert again == plan
    text = render_plan_markdown(plan)
    assert "| 1 |" in text and "gemm" in text.lower() and "CUDA graph" in text


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["steps"][0].update(technique="magic"), r"steps\[0\]\.technique: 'magic'"),
    (lambda d: d["steps"][0].update(nodes=[]), r"steps\[0\]\.nodes: a step must cover"),
    (lambda d: d["steps"][0].update(spec=None), r"steps\[0\]\.spec: a fused_reduction step"),
    (lambda d: d["steps"][0].update(estimated_bytes=-1), r"estimated_bytes: negative"),
    (lambda d: d["steps"][0].update(source_lines=[0]), r"source_lines\[0\]"),
    (lambda d: d.update(schema_version=2), r"schema_version: 2"),
    (lambda d: d["host"].update(cuda_graph="yes"), r"plan\.host\.cuda_graph: expected bool"),
    (lambda d: d["steps"].append(dict(d["steps"][0])), r"duplicate step id"),
    (lambda d: d.pop("module"), r"plan\.module: missing"),
])
def test_plan_validation_errors(mutate, message):
    data = json.loads(plan_of(EXAMPLES / "reduce_sum.py").dumps())
    mutate(data)
    with pytest.raises(PlanError, match=message):
        Plan.from_json(data)


def test_a_plan_with_nothing_to_fuse_says_so(tmp_path):
    from kernelstitch.agents.planner.builtin import GEMM_ONLY_NOTE, NOTHING_TO_FUSE_NOTE

    gemm_notes = plan_of(EXAMPLES / "big_gemm.py").notes
    assert GEMM_ONLY_NOTE in gemm_notes and NOTHING_TO_FUSE_NOTE not in gemm_notes
    conv_only = write(tmp_path, "return self.conv(x)", "[torch.randn(2, 3, 8, 8)]",
                      "self.conv = nn.Conv2d(3, 4, 3, bias=False)")
    assert NOTHING_TO_FUSE_NOTE in plan_of(conv_only).notes
    for fused in ("linear_bias_gelu.py", "mlp.py", "conv2d_bias_relu.py", "elementwise_chain.py"):
        assert NOTHING_TO_FUSE_NOTE not in plan_of(EXAMPLES / fused).notes, fused
    with_bias = write(tmp_path, "return self.fc(x)", "[torch.randn(8, 16)]",
                      "self.fc = nn.Linear(16, 32)", name="fc.py")
    assert NOTHING_TO_FUSE_NOTE not in plan_of(with_bias).notes  # the bias is a fused epilogue
    assert "nothing to fuse" in render_plan_markdown(plan_of(EXAMPLES / "big_gemm.py"))
    assert GEMM_ONLY_NOTE not in plan_of(conv_only).notes


def test_elementwise_tiled_path_only_for_operands_of_the_output_shape(tmp_path):
    """Only a full-size operand can be a channels-last conv output worth tiling: the spec names
    those inputs, so the kernel is not instantiated once per per-channel parameter."""
    path = write(tmp_path, "return torch.relu(x * self.w + self.b) + x.sigmoid()",
                 "[torch.randn(2, 8, 5, 5)]",
                 init="self.w = nn.Parameter(torch.randn(8, 1, 1))\nself.b = nn.Parameter(torch.randn(8, 1, 1))")
    (step,) = plan_of(path).steps
    names = [t["name"] for t in step.spec["inputs"]]
    assert [names[k] for k in step.spec["tiled_inputs"]] == ["x"] and len(names) == 3
    flat = write(tmp_path, "return torch.relu(x * 2)", "[torch.randn(4, 16)]", name="flat.py")
    assert plan_of(flat).steps[0].spec["tiled_inputs"] == []  # 2-D: no channels-last layout


def test_graph_variants_with_capturable_fallbacks_only(tmp_path):
    """A fallback `roll` (Swin's shifted windows; ViT's unfold likewise) can live in a CUDA graph:
    the replayed original of level3/28 took 1.37 ms against 3.22 ms eager on an H100, so the
    search times a graph variant.  Training dropout draws random numbers: no graph variant."""
    from kernelstitch.agents.planner.variants import graph_capturable, propose_variants

    rolled = write(tmp_path, "return torch.roll(torch.relu(x), 1, 1) * 2", "[torch.randn(4, 8)]",
                   name="roll.py")
    graph = capture(rolled)
    fallbacks = [s for s in plan_builtin(graph).steps if s.technique == "pytorch_fallback"]
    assert fallbacks and all(graph_capturable(s, graph) for s in fallbacks)
    assert any(v.plan.host.cuda_graph for v in propose_variants(graph, limit=8))

    indexed = write(tmp_path, "return x[:, torch.tensor([2, 0, 1])] * 2", "[torch.randn(6, 3)]",
                    name="index.py")
    graph = capture(indexed)
    (index,) = [s for s in plan_builtin(graph).steps if s.technique == "pytorch_fallback"]
    assert "index" in index.spec["op"] and graph_capturable(index, graph)  # integer indices

    masked = write(tmp_path, "return F.dropout(torch.relu(x), 0.5, training=True) * 2", "[torch.randn(4, 8)]",
                   name="drop.py")
    graph = capture(masked)
    fallbacks = [s for s in plan_builtin(graph).steps if s.technique == "pytorch_fallback"]
    assert fallbacks and not all(graph_capturable(s, graph) for s in fallbacks)
    assert not any(v.plan.host.cuda_graph for v in propose_variants(graph, limit=8))
