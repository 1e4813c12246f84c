"""Issue 22 (one slice): tensor constants created in forward and in-place ops, captured, planned
and coded on the CPU (the kernels need CUDA: tests/test_constants_inplace_gpu.py runs them)."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest
import torch
from kernelstitch.agents.inprocess import generate_builtin
from kernelstitch.agents.plan.graph import MAX_INLINE_CONSTANT_NUMEL, Graph
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import GraphCaptureError, capture

ROOT = Path(__file__).resolve().parent.parent
LEVEL2 = ROOT.parent / "shared" / "kernelbench" / "level2"
# (problem, value of its 0-d constant)
KERNELBENCH = [("31_Conv2d_Min_Add_Multiply.py", 0.5),
               ("83_Conv3d_GroupNorm_Min_Clamp_Dropout.py", 0.0),
               ("93_ConvTranspose2d_Add_Min_GELU_Multiply.py", 0.0)]

CONSTANTS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))

    def forward(self, x):
        x = torch.min(x, torch.tensor(0.25))                      # 0-d, CPU: folded
        x = x * torch.tensor([1.0, 2.0, -3.0, 0.5], device=x.device)  # 1-d: a buffer
        x = x + torch.tensor(2, device=x.device)                  # 0-d int on meta: folded
        return x * self.scale

batch = 7
features = 4

def get_inputs():
    return [torch.randn(batch, features)]

def get_init_inputs():
    return [features]
'''

# No kernel of ours: the program is PyTorch-only, so ModelNew runs on the CPU.
INDEX_CONSTANT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.index_select(1, torch.tensor([2, 0, 1], device=x.device))

def get_inputs():
    return [torch.randn(5, 3)]

def get_init_inputs():
    return []
'''

INPLACE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.relu = nn.ReLU(inplace=True)
        self.act = nn.Hardtanh(inplace=True)

    def forward(self, x, y):
        a = self.relu(self.conv(x))
        a.add_(1.0)
        a.mul_(y)
        a = self.act(a)
        a.clamp_(min=-0.5)
        return F.relu(a, inplace=True)

def get_inputs():
    return [torch.randn(2, 3, 10, 10), torch.randn(2, 8, 8, 8)]

def get_init_inputs():
    return []
'''

# The old value is read after the in-place op (b), or the op writes into a view of another
# value: both must stay the in-place PyTorch call they are.
INPLACE_OBSERVED = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = x * 2.0
        b = a + 1.0
        a.relu_()
        c = (x * 3.0).view(-1)
        c.relu_()
        return a + b, c

def get_inputs():
    return [torch.randn(4, 5)]

def get_init_inputs():
    return []
'''


def _write(tmp_path: Path, text: str, name: str = "problem.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _constants(graph: Graph) -> dict[str, dict]:
    return {n["placeholder"]["target"]: {"value": n["placeholder"]["value"], **n["outputs"][0]}
            for n in graph.to_json()["nodes"]
            if (n.get("placeholder") or {}).get("kind") == "constant"}


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"ks_test_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generate(path: Path, out: Path):
    candidate = generate_builtin(path, None, out / "model_new.py")
    compile(candidate.source, str(out / "model_new.py"), "exec")
    (out / "model_new.py").write_text(candidate.source)
    return candidate


def test_constants_are_captured_with_their_values_and_survive_json(tmp_path):
    graph = capture(_write(tmp_path, CONSTANTS))
    found = _constants(graph)
    assert sorted(c["value"] if not isinstance(c["value"], list) else tuple(c["value"])
                  for c in found.values() if c["shape"] == []) == [0.25, 2]
    vector = next(c for c in found.values() if c["shape"] == [4])
    assert vector["value"] == [1.0, 2.0, -3.0, 0.5] and vector["dtype"] == "float32"
    assert any(c["dtype"] == "int64" for c in found.values())
    again = Graph.from_json(json.loads(json.dumps(graph.to_json())))
    assert again.to_json() == graph.to_json()
    # export's lift_fresh_copy / detach_ of a constant are read as the constant itself
    assert not [n for n in graph.calls() if n.op in ("aten.lift_fresh_copy.default",
                                                     "aten.detach_.default")]


def test_zero_dim_constants_fold_into_the_kernel_and_others_become_buffers(tmp_path):
    path = _write(tmp_path, CONSTANTS)
    plan = plan_builtin(capture(path))
    assert [s.technique for s in plan.steps] == ["fused_elementwise"]
    step = plan.steps[0]
    graph = plan.graph
    constant_inputs = [i for i in step.inputs if graph.node(i).placeholder
                       and graph.node(i).placeholder.kind == "constant"]
    assert len(constant_inputs) == 1 and graph.node(constant_inputs[0]).meta.shape == (4,)
    operands = [a for op in step.spec["ops"] for a in op["args"] if not isinstance(a, str)]
    assert 0.25 in operands and 2.0 in operands
    assert any("tensor constant" in n for n in plan.notes)

    candidate = _generate(path, tmp_path)
    target = graph.node(constant_inputs[0]).placeholder.target
    line = (f"self.register_buffer('_ks_const_{target}', torch.tensor([1.0, 2.0, -3.0, 0.5], "
            "dtype=torch.float32), persistent=False)")
    assert candidate.source.count(line) == 1
    assert candidate.source.count("register_buffer('_ks_const_") == 1  # folded: none
    # The constructor (no kernel is built before the first forward) runs on the CPU; the
    # constant is no state_dict key, so reference weights load as they are.
    module = _import(tmp_path / "model_new.py")
    new = module.ModelNew(4)
    assert torch.equal(getattr(new, f"_ks_const_{target}"), torch.tensor([1.0, 2.0, -3.0, 0.5]))
    assert set(new.state_dict()) == {"scale"}


def test_a_constant_read_by_a_pytorch_op_runs_on_cpu(tmp_path):
    path = _write(tmp_path, INDEX_CONSTANT)
    candidate = _generate(path, tmp_path)
    assert [s.technique for s in candidate.plan.steps] == ["pytorch_fallback"]
    assert "torch.tensor([2, 0, 1], dtype=torch.int64)" in candidate.source
    new = _import(tmp_path / "model_new.py").ModelNew()
    x = torch.randn(6, 3)
    assert torch.equal(new(x), x[:, [2, 0, 1]])


def test_large_constants_are_refused_clearly(tmp_path):
    source = INDEX_CONSTANT.replace(
        "x.index_select(1, torch.tensor([2, 0, 1], device=x.device))",
        f"x + torch.tensor([0.5] * {MAX_INLINE_CONSTANT_NUMEL + 1}).sum()")
    with pytest.raises(GraphCaptureError, match="register_buffer") as info:
        capture(_write(tmp_path, source))
    assert str(MAX_INLINE_CONSTANT_NUMEL) in str(info.value)


@pytest.mark.parametrize("name, value", KERNELBENCH)
def test_kernelbench_problems_with_constants_plan_and_code(name, value, tmp_path):
    path = LEVEL2 / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    graph = capture(path)
    [constant] = _constants(graph).values()
    assert constant["value"] == value and constant["shape"] == []
    plan = plan_builtin(graph)
    graph_json = json.dumps(graph.to_json())
    assert '"kind": "constant"' in graph_json and f'"value": {value}' in graph_json
    def ops(step):  # an elementwise kernel's ops, or a reduction's epilogue (83: group_norm's)
        return (step.spec or {}).get("ops", []) + (step.spec or {}).get("epilogue", [])

    min_step = next(s for s in plan.steps if any(op["op"] == "minimum" for op in ops(s)))
    assert min_step.technique in ("fused_elementwise", "fused_reduction")
    [minimum] = [op for op in ops(min_step) if op["op"] == "minimum"]
    assert value in minimum["args"]  # a constant of the kernel, not a tensor it reads
    assert not any(plan.graph.node(i).placeholder
                   and plan.graph.node(i).placeholder.kind == "constant"
                   for s in plan.steps for i in s.inputs)
    candidate = _generate(path, tmp_path)
    body = candidate.source.split("class ModelNew", 1)[1]
    assert "_ks_const_" not in body and "lifted_tensor" not in body
    if name.startswith("31_"):  # conv (cuDNN) then one kernel: min, bias, scale
        assert [s.technique for s in plan.steps] == ["library_call", "fused_elementwise"]


def test_inplace_ops_on_fresh_values_are_planned_out_of_place(tmp_path):
    path = _write(tmp_path, INPLACE)
    graph = capture(path)
    inplace = [n.op for n in graph.calls() if n.op.split(".")[1].endswith("_")]
    # torch.export keeps them in-place (no functionalisation): relu_, add_, mul_, hardtanh_,
    # clamp_, relu_
    assert len(inplace) == 6, inplace
    plan = plan_builtin(graph)
    assert [s.technique for s in plan.steps] == ["library_call", "fused_elementwise"]
    assert not [n for s in plan.steps for n in s.nodes
                if plan.graph.node(n).op.split(".")[1].endswith("_")]
    assert any("6 in-place op(s) planned out of place" in n for n in plan.notes)
    candidate = _generate(path, tmp_path)
    assert "torch.ops.aten.relu_" not in candidate.source.split("def _compute", 1)[1]


def test_inplace_ops_whose_old_value_is_observed_stay_in_place(tmp_path):
    plan = plan_builtin(capture(_write(tmp_path, INPLACE_OBSERVED)))
    kept = [plan.graph.node(s.nodes[0]).op for s in plan.steps
            if s.technique == "pytorch_fallback"]
    assert kept == ["aten.relu_.default", "aten.relu_.default"]
    assert not any("in-place" in n for n in plan.notes)


# A constructor that reads tensor values (Swin's drop-path rates, level3/29 and 30): it cannot
# run on the meta device, so capture builds it on the CPU and drops the storage.
ITEM_IN_CONSTRUCTOR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, depth):
        super().__init__()
        rates = [x.item() for x in torch.linspace(0, 0.5, depth)]
        self.scales = nn.Parameter(torch.tensor(rates))
        self.fc = nn.Linear(depth, depth)

    def forward(self, x):
        return torch.relu(self.fc(x) * self.scales)

def get_inputs():
    return [torch.randn(4, 3)]

def get_init_inputs():
    return [3]
'''


def test_a_constructor_calling_item_is_built_on_the_cpu_and_captured(tmp_path):
    path = tmp_path / "item.py"
    path.write_text(ITEM_IN_CONSTRUCTOR)
    graph = capture(path)
    params = {n.placeholder.target for n in graph.placeholders() if n.placeholder.kind == "parameter"}
    assert params == {"scales", "fc.weight", "fc.bias"}
    plan = plan_builtin(graph)
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]


_KERNELBENCH = next((p for p in (Path(__file__).resolve().parents[1].parent / "shared" / "kernelbench",
                                 Path(__file__).resolve().parents[1] / ".kb" / "kernelbench") if p.is_dir()), None)


@pytest.mark.skipif(_KERNELBENCH is None, reason="no KernelBench copy (../shared/kernelbench or .kb/kernelbench)")
@pytest.mark.parametrize("problem", ["level3/19_MobileNetV1.py", "level3/29_SwinMLP.py"])
def test_level3_problems_that_failed_capture_now_plan(problem):
    """19: the dynamic export fails and the static retry failed too on the same tensors (their
    symbolic sizes stayed attached): it now retries on fresh inputs.  29: .item() in the
    constructor."""
    plan = plan_builtin(capture(_KERNELBENCH / problem))
    assert len(plan.steps) > 10


def test_an_op_on_a_constant_alone_reads_it_as_a_tensor(tmp_path):
    """Swin V2's `clamp(scale, max=torch.log(torch.tensor(1. / 0.01)))`: log of a 0-d constant
    has no other operand, so the constant stays its tensor input (a kernel needs one)."""
    path = _write(tmp_path, """
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.clamp(x, max=torch.log(torch.tensor(1. / 0.01, device=x.device))).exp()
        def get_inputs():
            return [torch.randn(4, 8) * 10]
        """)
    candidate = _generate(path, tmp_path)
    graph = candidate.plan.graph
    kernel_inputs = [i for s in candidate.plan.steps if s.is_kernel for i in s.inputs]
    assert any((graph.node(i).placeholder or None) and graph.node(i).placeholder.kind == "constant"
               for i in kernel_inputs)
    assert all(s.spec["inputs"] for s in candidate.plan.steps if s.is_kernel)
