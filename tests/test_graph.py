"""Graph capture on the meta device: ops, symbolic shapes, provenance, placeholders, errors."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from kernelstitch.agents.plan.graph import Graph, GraphError, NodeRef
from kernelstitch.agents.planner.capture import GraphCaptureError, capture
from kernelstitch.agents.planner.capture_task import capture_graph

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def write(tmp_path: Path, body: str, name: str = "problem.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def calls(graph: Graph) -> list[str]:
    return [n.op for n in graph.calls() if not n.op.startswith("aten.sym_size")]


def test_mlp_ops_shapes_lines_and_parameters():
    graph = capture(EXAMPLES / "mlp.py")
    assert calls(graph) == ["aten.linear.default", "aten.gelu.default", "aten.linear.default"]
    params = {n.placeholder.target for n in graph.placeholders() if n.placeholder.kind == "parameter"}
    assert params == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    (x,) = graph.user_inputs()
    assert x.placeholder.index == 0 and x.meta.example_shape == (8192, 4096)
    assert isinstance(x.meta.shape[0], str)  # batch is symbolic: one candidate for all sizes
    assert x.meta.shape[1] == 4096  # fixed by the weight
    lines = (EXAMPLES / "mlp.py").read_text().splitlines()
    fc1 = graph.calls()[0]
    assert fc1.module_path == "fc1" and "self.fc1(x)" in lines[fc1.line - 1]
    assert fc1.meta.example_shape == (8192, 16384) and fc1.meta.dtype == "float32"
    assert graph.outputs == [NodeRef(graph.calls()[-1].name)] and not graph.output_is_tuple


def test_scalar_attributes_become_constants_and_softmax_dim_kept():
    graph = capture(EXAMPLES / "softmax_temperature.py")
    div, softmax = graph.calls()
    assert div.op == "aten.div.Tensor" and div.args[1] == pytest.approx(0.7)
    assert softmax.op == "aten.softmax.int" and softmax.args[1] == -1


def test_views_sizes_tuple_outputs_and_buffers(tmp_path):
    path = write(tmp_path, """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("shift", torch.zeros(4), persistent=False)
            def forward(self, x):
                y = x.view(x.size(0), -1)
                return y * 2.0, x.sum(dim=1)
        def get_inputs():
            return [torch.randn(8, 4, 16)]
    """)
    graph = capture(path)
    ops = calls(graph)
    assert "aten.view.default" in ops and "aten.mul.Tensor" in ops
    view = next(n for n in graph.calls() if n.op == "aten.view.default")
    size_ref = view.args[1][0]
    assert isinstance(size_ref, NodeRef) and graph.node(size_ref.node).op == "aten.sym_size.int"
    assert view.line == 9
    buf = next(n for n in graph.placeholders() if n.placeholder.kind == "buffer")
    assert buf.placeholder.target == "shift" and buf.placeholder.persistent is False
    assert graph.output_is_tuple and len(graph.outputs) == 2


def test_json_round_trip_through_the_task():
    data = capture_graph(str(EXAMPLES / "layernorm_residual.py"), None)
    again = Graph.from_json(json.loads(json.dumps(data)))
    assert again.to_json() == data
    ln = next(n for n in again.calls() if n.op == "aten.layer_norm.default")
    assert ln.args[1] == [4096] and ln.module_path == "norm"


def test_constants_override_shrinks_the_capture():
    graph = capture(EXAMPLES / "mlp.py", constants={"BATCH": 7, "IN_FEATURES": 5, "HIDDEN": 3,
                                                    "OUT_FEATURES": 2})
    assert graph.calls()[-1].meta.example_shape == (7, 2)


def test_export_failure_names_the_line(tmp_path):
    path = write(tmp_path, """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x
                return -x
        def get_inputs():
            return [torch.randn(4)]
    """)
    with pytest.raises(GraphCaptureError) as info:
        capture(path)
    assert info.value.line == 6 and "problem.py:6" in str(info.value)


def test_data_dependent_control_flow_is_one_sentence_of_cause_and_fix(tmp_path):
    """Issue 27: torch.export's GuardOnDataDependent page became one sentence with the line."""
    path = write(tmp_path, """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * 2
                return x - 1
        def get_inputs():
            return [torch.randn(4, 4)]
    """)
    with pytest.raises(GraphCaptureError) as info:
        capture(path)
    message = str(info.value)
    assert message.startswith("problem.py:6: Model.forward branches or loops on tensor values")
    assert "torch.where" in message and "\n" not in message and info.value.line == 6


def test_problem_errors_become_capture_errors(tmp_path):
    path = write(tmp_path, """
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x
    """)
    with pytest.raises(GraphCaptureError, match="no example inputs"):
        capture(path)


def test_malformed_graph_json_is_rejected():
    data = capture_graph(str(EXAMPLES / "swiglu_gate.py"))
    data["nodes"][-1]["args"] = [{"ref": "nowhere"}]
    with pytest.raises(GraphError, match="unknown node 'nowhere'"):
        Graph.from_json(data)
    with pytest.raises(GraphError, match="schema_version"):
        Graph.from_json({**data, "schema_version": 99})


def test_a_flatten_into_a_fixed_linear_keeps_the_batch_dynamic(tmp_path):
    """MobileNet's `avg_pool2d(x, 7).view(x.size(0), -1)` into a Linear: exporting every size
    dynamic fails on the spatial sizes; the batch stays symbolic (the verifier tries other batch
    sizes), the other sizes as captured, and a note says so."""
    path = write(tmp_path, """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
                self.fc = nn.Linear(8, 5)
            def forward(self, x):
                x = F.avg_pool2d(self.conv(x), 7)
                return self.fc(x.view(x.size(0), -1))
        def get_inputs():
            return [torch.randn(2, 3, 14, 14)]
        def get_init_inputs():
            return []
    """)
    graph = capture(path)
    (x,) = graph.user_inputs()
    assert isinstance(x.meta.shape[0], str) and x.meta.shape[1:] == (3, 14, 14)
    (view,) = [n for n in graph.calls() if n.op == "aten.view.default"]
    assert isinstance(view.args[1][0], NodeRef)  # x.size(0), not the captured 2
    assert any("only the batch dims are dynamic" in note for note in graph.notes)


def test_a_batch_size_the_code_pins_is_said_in_the_notes(tmp_path):
    """Swin's window reshapes pin the batch without failing the export: the plan's notes say the
    candidate accepts only that batch size (the Verifier's other-shape cases would reject it)."""
    path = write(tmp_path, """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x.view(2, 8) * 2.0
        def get_inputs():
            return [torch.randn(2, 8)]
        def get_init_inputs():
            return []
    """)
    graph = capture(path)
    (x,) = graph.user_inputs()
    assert x.meta.shape[0] == 2
    assert any("export fixed the batch size (x to 2)" in note for note in graph.notes)
    assert not any("batch size" in note for note in capture(EXAMPLES / "mlp.py").notes)
