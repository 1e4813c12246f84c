"""Issue 22 (batch_norm): training mode as a statistics kernel (per-channel batch mean and
variance with the ops before it as a prologue, the running statistics updated in place) and an
elementwise normalisation fused with the ops after it; eval mode as elementwise ops over the
running statistics.  Plans, specs and emitted sources on the CPU; tests/test_batch_norm_gpu.py
runs them on a GPU against PyTorch."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kernelstitch.agents.coder.builtin import code_builtin
from kernelstitch.agents.coder.codegen import emit
from kernelstitch.agents.plan.kernel_spec import (
    BatchStatsMergeSpec,
    BatchStatsSpec,
    spec_from_json,
    spec_to_json,
)
from kernelstitch.agents.planner.builtin import plan_builtin
from kernelstitch.agents.planner.capture import capture
from test_codegen import batch_stats_merge_specs, batch_stats_specs
from test_norms import _HEADER, write

# conv -> BatchNorm2d (training) -> relu (level2/73's program); channels-last conv output
CONV_BATCH_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.bn = nn.BatchNorm2d(cout, momentum=0.2)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x))) * 2.0

batch, cin, cout, height, width = 4, 3, 8, 13, 17

def get_inputs():
    return [torch.randn(batch, cin, height, width)]

def get_init_inputs():
    return [cin, cout]
'''

# Linear -> * s -> BatchNorm1d (level2/39): [N, C], the channel-stride-1 kernel
LINEAR_BATCH_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.fc = nn.Linear(fin, fout)
        self.bn = nn.BatchNorm1d(fout, eps=1e-3)

    def forward(self, x):
        return self.bn(self.fc(x) * 0.5)

batch, fin, fout = 37, 16, 45

def get_inputs():
    return [torch.randn(batch, fin)]

def get_init_inputs():
    return [fin, fout]
'''

# conv3d -> BatchNorm3d without affine or running statistics -> tanh (NCDHW planes)
CONV3D_BATCH_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 3)
        self.bn = nn.BatchNorm3d(cout, affine=False, track_running_stats=False)

    def forward(self, x):
        return torch.tanh(self.bn(self.conv(x)))

batch, cin, cout, size = 2, 2, 5, 9

def get_inputs():
    return [torch.randn(batch, cin, size, size + 1, size + 2)]

def get_init_inputs():
    return [cin, cout]
'''

# fp16 storage: the statistics kernel takes float32 only, PyTorch keeps it
HALF_BATCH_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c).half()

    def forward(self, x):
        return self.bn(x)

def get_inputs():
    return [torch.randn(2, 4, 5, 5).half()]

def get_init_inputs():
    return [4]
'''

# batch_norm with running statistics (a module put in eval mode by its constructor, and the
# functional form): elementwise, fused with the conv bias before and the activation after
EVAL_BATCH_NORM = _HEADER + '''
class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.bn = nn.BatchNorm2d(cout)
        self.register_buffer("mean2", torch.randn(cout))
        self.register_buffer("var2", torch.rand(cout) + 0.5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)
        self.eval()

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return F.batch_norm(y, self.mean2, self.var2, None, None, False, 0.1, 1e-3) * 0.5

batch, cin, cout, size = 2, 3, 6, 12

def get_inputs():
    return [torch.randn(batch, cin, size, size)]

def get_init_inputs():
    return [cin, cout]
'''

# A DenseNet dense block (level3/14's): each layer normalises the cat of the block's input and
# every earlier layer's output; eps 1e-3 (the parts' statistics must use the merged batch_norm's)
DENSE_BLOCK = _HEADER + '''
class Model(nn.Module):
    def __init__(self, layers, cin, growth):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(
            nn.BatchNorm2d(cin + i * growth, eps=1e-3), nn.ReLU(inplace=True),
            nn.Conv2d(cin + i * growth, growth, 3, padding=1, bias=False), nn.Dropout(0.0))
            for i in range(layers))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(x))
            x = torch.cat(features, 1)
        return x

batch, layers, cin, growth, size = 3, 4, 6, 5, 11

def get_inputs():
    return [torch.randn(batch, cin, size, size + 2)]

def get_init_inputs():
    return [layers, cin, growth]
'''

CASES = {
    "conv_batch_norm": (CONV_BATCH_NORM, {"height": 9, "width": 8}),
    "linear_batch_norm": (LINEAR_BATCH_NORM, {"batch": 3}),
    "conv3d_batch_norm": (CONV3D_BATCH_NORM, {"size": 6}),
    "eval_batch_norm": (EVAL_BATCH_NORM, {"size": 9}),
    "dense_block": (DENSE_BLOCK, {"size": 7, "batch": 2}),
}


def _plan(tmp_path, source):
    return plan_builtin(capture(write(tmp_path, source)))


@pytest.mark.parametrize("spec", batch_stats_specs(), ids=lambda s: s.name)
def test_batch_stats_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


@pytest.mark.parametrize("change, message", [
    ({"running_var": None}, "come together"),
    ({"channel_inputs": ("x",)}, "inputs\\[0\\]"),
    ({"channel_inputs": ("nope",)}, "not one of the inputs"),
    ({"momentum": 1.5}, "out of range"),
])
def test_emitter_rejects_inconsistent_specs(change, message):
    with pytest.raises(ValueError, match=message):
        emit(replace(batch_stats_specs()[0], **change))


def test_emitted_source_reads_channel_operands_once_and_updates_running_stats():
    kernel = emit(batch_stats_specs()[0])  # x (taps), b (channel), y (taps), rm, rv
    loop = kernel.cuda[kernel.cuda.index("auto value_at = "):kernel.cuda.index("ks_block_merge(st, sm, t, t >> 5")]
    assert "ks_offset(d1, c * g.S)" in kernel.cuda and "d1" not in loop
    assert "ks_offset(d2, li)" in loop
    assert "running_var[c] = (1.f - momentum)" in kernel.cuda
    assert "in_3.data_ptr<float>(), in_4.data_ptr<float>()" in kernel.binding
    assert kernel.python_args == ("x", "b", "y", "rm", "rv")


def test_the_nchw_16_byte_form_is_compiled_only_where_every_value_read_is_the_inputs():
    """kernel.cu's V4 statistics pass (float4s of one plane): float32 input, operands per channel
    at most; a full-size operand read per value (bstats_full's y) or fp16 values keep the scalar
    form only.  The binding picks it at run time (NCHW planes of a multiple of 4, aligned)."""
    from kernelstitch.agents.plan.kernel_spec import BatchStatsSpec, ElementwiseOp, TensorArg

    bias_relu = BatchStatsSpec("bs", (TensorArg("x", "float32"), TensorArg("b", "float32")), 1e-5, 0.1,
                               (ElementwiseOp("add", ("x", "b"), "t"), ElementwiseOp("relu", ("t",), "u")), "u",
                               ("b",))
    for spec, v4 in [(bias_relu, True), (batch_stats_specs()[0], False), (batch_stats_specs()[1], False)]:
        kernel = emit(spec)
        assert ("  if (V4 && c < g.C) {\n#if 1" in kernel.cuda) == v4, spec.name
        assert (f"const int v4 = {int(v4)} && !rows && g.sS == 1 && g.S % 4 == 0" in kernel.binding), spec.name
        assert "if (v4) g.per_part = ks_cdiv(g.per_part, 4) * 4;" in kernel.binding  # parts of whole float4s


def test_training_batch_norm_is_a_statistics_kernel_and_a_fused_normalisation(tmp_path):
    plan = _plan(tmp_path, CONV_BATCH_NORM)
    assert [s.technique for s in plan.steps] == ["library_call", "fused_reduction", "fused_elementwise"]
    stats = plan.steps[1].kernel_spec()
    assert isinstance(stats, BatchStatsSpec) and stats.momentum == 0.2 and stats.eps == 1e-5
    assert [o.op for o in stats.prologue] == ["add"] and len(stats.channel_inputs) == 1  # the conv bias
    assert stats.running_mean and stats.running_var and stats.inputs[-1].name == stats.running_var
    ops = [o.op for o in plan.steps[2].kernel_spec().ops]
    assert ops == ["add", "sub", "mul", "mul", "add", "relu", "mul"]  # bias, normalise, affine, relu, * 2
    assert any("statistics kernel" in n for n in plan.notes)


def test_batch_norm_1d_and_3d_without_running_stats_plan_without_fallback(tmp_path):
    for source in (LINEAR_BATCH_NORM, CONV3D_BATCH_NORM):
        plan = _plan(tmp_path, source)
        assert "pytorch_fallback" not in [s.technique for s in plan.steps], source
    stats = next(s.kernel_spec() for s in _plan(tmp_path, CONV3D_BATCH_NORM).steps
                 if (s.spec or {}).get("type") == "batch_stats")
    assert stats.running_mean is None and stats.running_var is None


def test_half_precision_training_batch_norm_stays_in_pytorch(tmp_path):
    plan = _plan(tmp_path, HALF_BATCH_NORM)
    assert "pytorch_fallback" in [s.technique for s in plan.steps]


def test_channels_last_conv_output_goes_to_the_statistics_without_a_copy(tmp_path):
    path = write(tmp_path, CONV_BATCH_NORM)
    plan = plan_builtin(capture(path))
    candidate = code_builtin(plan, path, tmp_path / "model_new.py")
    forward = candidate.source[candidate.source.index("def _compute"):]
    assert "ks_layout_swap(v_x, True)" in forward and "NHWC back to NCHW" not in forward


def test_eval_batch_norm_is_one_elementwise_kernel_with_the_conv_bias_and_relu(tmp_path):
    plan = _plan(tmp_path, EVAL_BATCH_NORM)
    assert [s.technique for s in plan.steps] == ["library_call", "fused_elementwise"]
    ops = [o.op for o in plan.steps[1].kernel_spec().ops]
    assert ops.count("rsqrt") == 2 and "relu" in ops and ops[0] == "add"  # conv bias first
    assert sum("running statistics (eval mode)" in n for n in plan.notes) == 2


def test_training_and_eval_batch_norm_in_one_module(tmp_path):
    source = EVAL_BATCH_NORM.replace("        self.eval()\n", "")
    plan = _plan(tmp_path, source)
    assert "pytorch_fallback" not in [s.technique for s in plan.steps]
    assert sum("statistics kernel" in n for n in plan.notes) == 1


def test_running_stat_updates_allow_cuda_graph_variants(tmp_path):
    """The graph's warm-up run restores the buffers it updates (wrapper.py), so training
    batch_norm no longer rules CUDA-graph replay out: a ResNet is launch-bound (the replayed
    original took 1.33 ms against 3.07 ms eager for level3/9 on an H100), and the search times
    both (tests/test_batch_norm_gpu.py checks the running statistics under replay)."""
    from kernelstitch.agents.planner.variants import propose_variants

    path = write(tmp_path, CONV_BATCH_NORM)
    graph = capture(path)
    plan = plan_builtin(graph)
    assert not any("module buffers" in r for r in plan.host.reasons)
    variants = propose_variants(graph, limit=8)
    assert {v.plan.host.cuda_graph for v in variants} == {True, False}
    candidate = code_builtin(next(v.plan for v in variants if v.plan.host.cuda_graph),
                             path, tmp_path / "model_new.py")
    assert "buffer.copy_(value)" in candidate.source and "_CudaGraphs()" in candidate.source


def test_running_statistics_read_elsewhere_keep_the_batch_norm_in_pytorch(tmp_path):
    """The statistics kernel updates the running statistics in place: a kernel after it that
    read them (here the normalisation recomputing ``conv - running_mean``) would see new values."""
    source = CONV_BATCH_NORM.replace("return torch.relu(self.bn(self.conv(x))) * 2.0",
                                     "return self.bn(self.conv(x) - self.bn.running_mean.view(1, -1, 1, 1))")
    plan = _plan(tmp_path, source)
    assert not any((s.spec or {}).get("type") == "batch_stats" for s in plan.steps)
    assert "pytorch_fallback" in [s.technique for s in plan.steps]


def test_momentum_torch_accepts_but_the_kernel_does_not_stays_in_pytorch(tmp_path):
    plan = _plan(tmp_path, CONV_BATCH_NORM.replace("momentum=0.2", "momentum=1.5"))
    assert "pytorch_fallback" in [s.technique for s in plan.steps]


def test_the_graph_key_reads_every_tensor_slot_each_call_and_walks_again_after_a_registration(tmp_path):
    """A replay's key holds every parameter's and buffer's pointer.  Walking the module for them
    cost ~1.3 us a tensor of Python per call (417 us on MobileNetV2, ahead of each replay), so the
    tensors' slots (their modules' dicts) are kept until torch's registration hooks see a
    structural change, and read on every call: Module._apply (.double(), .to()) writes converted
    buffers straight into `_buffers`, and `.data` swaps change pointers, neither registering."""
    import importlib.util

    import torch

    path = write(tmp_path, CONV_BATCH_NORM)
    candidate_path = tmp_path / "model_new.py"
    candidate_path.write_text(code_builtin(plan_builtin(capture(path)), path, candidate_path).source)
    spec = importlib.util.spec_from_file_location("ks_graph_key_candidate", candidate_path)
    candidate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(candidate)
    new = candidate.ModelNew(3, 8)
    graphs = candidate._CudaGraphs()
    x = torch.randn(4, 3, 13, 17)

    def walked_pointers():
        return tuple(t.data_ptr() for t in [*new.parameters(), *new.buffers()])

    first = graphs.signature(new, (x,))
    assert first[1] == walked_pointers()
    tensors = new._ks_slots.tensors(new)
    assert new._ks_slots.tensors(new) is tensors  # nothing changed: the same list
    assert graphs.signature(new, (x,)) == first

    new.conv.weight.data = new.conv.weight.data.clone()  # a .data swap: no registration
    assert new._ks_slots.tensors(new) is tensors
    moved = graphs.signature(new, (x,))
    assert moved != first and moved[1] == walked_pointers()

    new.conv.weight = torch.nn.Parameter(torch.randn_like(new.conv.weight))  # a new parameter
    assert new._ks_slots.tensors(new) is not tensors
    assert any(t is new.conv.weight for t in new._ks_slots.tensors(new))
    assert graphs.signature(new, (x,))[1] == walked_pointers() != moved[1]

    new.bn.register_buffer("extra", torch.zeros(3))  # a new buffer is walked too
    assert len(graphs.signature(new, (x,))[1]) == len(walked_pointers()) == len(first[1]) + 1
    assert graphs.signature(new, (x.transpose(2, 3),)) != graphs.signature(new, (x,))

    before = graphs.signature(new, (x,))
    new.double()  # Module._apply: converted buffers written into `_buffers`, unregistered
    assert all(t.dtype == torch.float64 for t in new._ks_slots.tensors(new) if t.is_floating_point())
    assert graphs.signature(new, (x,))[1] == walked_pointers() != before[1]
    own = candidate._CudaGraphs()  # a module without slots of its own: the graphs' own
    assert own.signature(torch.nn.Linear(2, 3), (x,))[1] != ()


@pytest.mark.parametrize("spec", batch_stats_merge_specs(), ids=lambda s: s.name)
def test_batch_stats_merge_spec_round_trips_through_json(spec):
    assert spec_from_json(spec_to_json(spec)) == spec


@pytest.mark.parametrize("change, message", [
    ({"running_var": None}, "come together"),
    ({"parts": 4}, "the sizes tensor"),
    ({"parts": 65}, "1 to 64"),
    ({"momentum": -0.5}, "out of range"),
])
def test_merge_emitter_rejects_inconsistent_specs(change, message):
    with pytest.raises(ValueError, match=message):
        emit(replace(batch_stats_merge_specs()[0], **change))


def test_a_dense_block_computes_each_tensors_statistics_once(tmp_path):
    """Every layer after the first normalises a cat: its statistics are merged from the parts'
    (the block's input's are the first layer's own batch_norm statistics, with its eps), so each
    tensor is read once for statistics instead of once per later layer."""
    plan = _plan(tmp_path, DENSE_BLOCK)
    stats = [s for s in plan.steps if (s.spec or {}).get("type") == "batch_stats"]
    merges = [s for s in plan.steps if (s.spec or {}).get("type") == "batch_stats_merge"]
    assert len(merges) == 3 and len(stats) == 4  # x (with layer 0's running stats), 3 conv outputs
    assert [s.kernel_spec().inputs[0].name for s in stats].count("x") == 1
    assert all(s.kernel_spec().eps == 1e-3 for s in stats + merges)
    assert [s.kernel_spec().running_mean is not None for s in stats] == [True, False, False, False]
    for k, merge in enumerate(merges, start=1):
        spec = merge.kernel_spec()
        assert isinstance(spec, BatchStatsMergeSpec) and spec.parts == k + 1
        assert [t.name for t in spec.inputs[:spec.parts]] == [s.outputs[0] for s in stats[:k + 1]]
        assert spec.inputs[spec.parts].name.startswith("cat") and spec.running_var == spec.inputs[-1].name
    assert any("merged from its 4 tensors' own" in n for n in plan.notes)


def test_a_single_concatenation_keeps_one_statistics_kernel(tmp_path):
    """A cat normalised once (no part shared with another batch_norm): merging would read the
    same bytes in more launches, so the statistics stay one kernel over the cat."""
    source = _HEADER + '''
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x, y):
        return self.bn(torch.cat([x, y], 1))

def get_inputs():
    return [torch.randn(2, 3, 5, 5), torch.randn(2, 5, 5, 5)]

def get_init_inputs():
    return []
'''
    plan = _plan(tmp_path, source)
    kinds = [(s.spec or {}).get("type") for s in plan.steps]
    assert "batch_stats_merge" not in kinds and kinds.count("batch_stats") == 1
