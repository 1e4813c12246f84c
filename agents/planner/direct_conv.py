"""2-D convolutions of few input channels computed directly with their elementwise epilogue
(ConvEpilogueSpec, coder/codegen/conv_epilogue.py): the plan's steps rewritten, for the measured
search's `conv-direct` variant.

Where C_in x kh x kw is small (level 2's 8-channel 3 x 3 convolutions: 72 FMAs an output value),
the cuDNN path costs passes over the output, not FLOPs: the NCHW -> NHWC copy of the input,
cuDNN's store of the output, and the epilogue kernel's read and write of it.  The direct kernel
reads the NCHW input once and stores the epilogue's result once, contiguous.  It computes in fp32
FMAs, where cuDNN under PyTorch's defaults runs TF32 tensor cores: whether the saved passes pay
for the slower arithmetic is the search's measurement, never an assumption.  Measured on an H100
(2026-12-07, bench/results/2026-12-07-h100-s32): 27-29 TFLOP/s, 2.1-2.2x cuDNN's NCHW convolution +
epilogue at level 2's 8-channel shapes; the search delivered it on level2/87, 69 and 65 and kept
cuDNN on level2/82.

A conv step qualifies when it is `aten.conv2d.default` of a float32 4-D input with dilation 1,
one group and no bias of its own (the planner moves the bias into the epilogue), its output read
by exactly one step, and not returned; that step reads it once and is a fused elementwise step of
the same output shape, or a pooling whose windows tile the output (kernel_spec.conv_epilogue_pools:
level2/82's 4 x 4 max pool after tanh, scale and bias, level2/65's 4 x 4 average pool).  The merged step takes the elementwise step's place (its other inputs exist by then),
as a `fused_convolution` step: compute-bound by design, so the bench's bandwidth metric (issue
22's, over memory-bound steps) leaves it out.
"""

from __future__ import annotations

from dataclasses import replace

from kernelstitch.agents.plan import Plan, PlanStep
from kernelstitch.agents.plan.graph import Graph, NodeRef
from kernelstitch.agents.plan.kernel_spec import (
    CONV_EPILOGUE_MAX_REDUCTION,
    ConvEpilogueSpec,
    ElementwiseSpec,
    PoolSpec,
    TensorArg,
    conv_epilogue_pools,
    conv_epilogue_staged_channels,
    spec_to_json,
)

CONV2D = "aten.conv2d.default"


def _pair(value, default: int) -> tuple[int, int] | None:
    """A conv argument as an (h, w) pair of ints; None when it is not constant."""
    if value is None:
        return default, default
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    if isinstance(value, (list, tuple)) and len(value) == 1 and isinstance(value[0], int):
        return int(value[0]), int(value[0])
    return None


def conv_geometry(graph: Graph, name: str) -> tuple[str, str, tuple[int, int], tuple[int, int], tuple[int, int]] | None:
    """(input, weight, kernel, stride, padding) of a conv2d node the direct kernel takes, else None."""
    node = graph.node(name)
    if node.op != CONV2D or node.kwargs or not all(isinstance(a, NodeRef) for a in node.args[:2]):
        return None
    args = list(node.args) + [None] * (7 - len(node.args))
    x, w, bias, stride, padding, dilation, groups = args[:7]
    if bias is not None or groups not in (None, 1) or _pair(dilation, 1) != (1, 1):
        return None
    stride, padding = _pair(stride, 1), _pair(padding, 0)
    xm, wm = graph.node(x.node).meta, graph.node(w.node).meta
    if stride is None or padding is None or xm is None or wm is None:
        return None
    if xm.rank != 4 or wm.rank != 4 or xm.dtype != "float32" or wm.dtype != "float32":
        return None
    if not all(isinstance(v, int) for v in wm.shape):  # the weight's sizes are compiled in
        return None
    _, cin, kh, kw = wm.shape
    if cin * kh * kw > CONV_EPILOGUE_MAX_REDUCTION or conv_epilogue_staged_channels((kh, kw), stride, cin) < 1:
        return None
    return x.node, w.node, (kh, kw), stride, padding


def direct_conv_steps(plan: Plan) -> list[PlanStep] | None:
    """`plan`'s steps with every qualifying conv + epilogue pair merged; None when none qualifies.
    The plan must be NCHW (the variant is built from the NCHW layout variant)."""
    graph = plan.graph
    returned = {v.node for v in graph.outputs if isinstance(v, NodeRef)}
    # every reader in the graph: a view the program computes on the host (flatten, a size) reads
    # the conv output without being a step's input, and would lose its producer
    graph_users = graph.users()
    readers: dict[str, list[PlanStep]] = {}
    for step in plan.steps:
        for value in dict.fromkeys(step.inputs):
            readers.setdefault(value, []).append(step)
    merged: dict[str, PlanStep] = {}  # epilogue step id -> merged step
    dropped: set[str] = set()
    for conv in plan.steps:
        if conv.technique != "library_call" or len(conv.nodes) != 1 or len(conv.outputs) != 1:
            continue
        geometry = conv_geometry(graph, conv.nodes[0])
        out = conv.outputs[0]
        users = readers.get(out, [])
        if geometry is None or out in returned or len(users) != 1:
            continue
        epi = users[0]
        spec = epi.kernel_spec() if epi.is_kernel and epi.id not in merged else None
        if isinstance(spec, ElementwiseSpec) and not spec.keep_channels_last:
            meta = graph.node(out).meta  # every output the conv's shape: no broadcast grows it
            if meta is None or any(graph.node(o).meta is None or graph.node(o).meta.shape != meta.shape
                                   for o in epi.outputs):
                continue
        elif not (isinstance(spec, PoolSpec) and conv_epilogue_pools(spec) and spec.inputs[0].name == out):
            continue
        names = [t.name for t in spec.inputs]
        if names.count(out) != 1 or list(epi.inputs) != names or set(graph_users.get(out, [])) - set(epi.nodes):
            continue
        x, w, kernel, stride, padding = geometry
        cin = graph.node(w).meta.shape[1]
        operand = names.index(out)
        direct = ConvEpilogueSpec(
            name=f"ks_{epi.id}_conv_epilogue", x=TensorArg(x, "float32"), weight=TensorArg(w, "float32"),
            kernel=kernel, stride=stride, padding=padding, epilogue=spec, operand=operand,
            ci_tile=conv_epilogue_staged_channels(kernel, stride, cin))
        others = [n for n in names if n != out]
        merged[epi.id] = replace(
            epi, technique="fused_convolution", nodes=[*conv.nodes, *epi.nodes], spec=spec_to_json(direct),
            inputs=[x, w, *others],
            source_lines=sorted({*conv.source_lines, *epi.source_lines}), channels_last=False,
            description=f"conv2d {kernel[0]}x{kernel[1]} computed directly in fp32 with "
                        f"{'its pooling' if isinstance(spec, PoolSpec) else 'its epilogue'} "
                        f"({epi.description}): the conv output never stored",
            estimated_flops=conv.estimated_flops + epi.estimated_flops,
            estimated_bytes=max(0, epi.estimated_bytes - 2 * _bytes(graph, out)) + _bytes(graph, x) + _bytes(graph, w))
        dropped.add(conv.id)
    if not merged:
        return None
    return [merged.get(s.id, s) for s in plan.steps if s.id not in dropped]


def _bytes(graph: Graph, name: str) -> int:
    meta = graph.node(name).meta
    return 0 if meta is None else meta.numel * 4
