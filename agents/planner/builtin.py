"""The built-in planner: Graph -> Plan, deterministic and offline.

rewrites (exact algebra) -> fusion schedule (groups) -> one PlanStep per group, with its codegen
spec, the values it reads and writes, cost estimates from the captured shapes, and the host
settings (CUDA graph, channels_last, preallocation) with the reason for each choice.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace

from kernelstitch.agents.plan import KERNEL_TECHNIQUES, HostSettings, Plan, PlanStep, human_bytes
from kernelstitch.agents.plan.graph import Graph, Node, NodeRef, TensorMeta
from kernelstitch.agents.plan.kernel_spec import (
    NORMALIZING_KINDS,
    ArgReduceSpec,
    AttentionSpec,
    BatchStatsMergeSpec,
    BatchStatsSpec,
    CatSegment,
    CatSpec,
    ConvTapMeansSpec,
    ElementwiseOp,
    ElementwiseSpec,
    GemmSpec,
    NllLossSpec,
    PoolSpec,
    ReductionSpec,
    ScanSpec,
    TensorArg,
    TriangleSpec,
    spec_to_json,
)
from kernelstitch.agents.planner.contraction import contraction_roles
from kernelstitch.agents.planner.fusion import Group, Schedule, schedule
from kernelstitch.agents.planner.monotone import hoist_monotone_tail
from kernelstitch.agents.planner.ops import (
    ARG_REDUCE_KINDS,
    ELEMENT_SIZE,
    EXCLUSIVE_SCANS,
    RECURRENT_LIBRARY_OPS,
    REDUCTION_KINDS,
    RELU_ATTENTION_OP,
    REVERSE_SCANS,
    SCAN_KINDS,
    SDPA_OP,
    TRIANGLE_KINDS,
    base_op,
    elementwise_flops,
    norm_affine,
    norm_eps,
    norm_groups,
    pool_params,
    reduced_dims,
    torch_ops_for,
    translate_elementwise,
)
from kernelstitch.agents.planner.recurrent_kernel import cell_of, recurrent_spec
from kernelstitch.agents.planner.rewrites import apply_rewrites, conv_bias_adds

CUDA_GRAPH_MAX_BYTES = 64 << 20  # below this a forward is launch-bound on an H100
CUDA_GRAPH_MIN_LAUNCHES = 2


def gemm_kernels_available() -> bool:
    """The cuBLASLt GEMM emitter is part of this build (agents/coder/codegen/gemm.py)."""
    return importlib.util.find_spec("kernelstitch.agents.coder.codegen.gemm") is not None


# Kernel steps of ours that do work PyTorch would not (fusion, a rewrite); a GEMM step counts
# only with an epilogue.
_FUSING_TECHNIQUES = KERNEL_TECHNIQUES - {"gemm_epilogue"}
NOTHING_TO_FUSE_NOTE = (
    "nothing to fuse: every step is a library call (GEMM without an epilogue, conv, or a PyTorch "
    "op), the same work PyTorch already does. Expect no speedup; the Verifier rejects a "
    "candidate that runs none of its own kernels and calls no library itself "
    "(no_custom_kernel). Keep the original module.")
GEMM_ONLY_NOTE = (
    "nothing to fuse: every step is a cuBLASLt GEMM without an epilogue, the work PyTorch's "
    "matmul already hands to cuBLAS. The candidate calls cuBLASLt itself, so the Verifier can "
    "accept it, but expect no speedup: keep the original unless the report measures one.")


def nothing_to_fuse(steps: list[PlanStep]) -> str | None:
    """The note for a plan in which no step fuses anything or runs a kernel of ours beyond the
    library call itself (None when something is fused)."""
    def fuses(step: PlanStep) -> bool:
        if step.technique in _FUSING_TECHNIQUES:
            return True
        spec = step.spec or {}
        return step.technique == "gemm_epilogue" and (
            spec.get("bias") is not None or spec.get("activation", "none") != "none")

    if not steps or any(fuses(s) for s in steps):
        return None
    return GEMM_ONLY_NOTE if all(s.technique == "gemm_epilogue" for s in steps) else NOTHING_TO_FUSE_NOTE


def plan_builtin(graph: Graph, gemm_kernels: bool | None = None, attention: bool = True,
                 cat_kernels: bool = True, attention_kernels: bool = True,
                 batch_norm_kernels: bool = True, recurrent_kernels: bool = False,
                 group_norm_stats: bool = False, contraction_kernels: bool = True) -> Plan:
    """`attention`: written-out attention as scaled_dot_product_attention (planner/attention.py);
    `cat_kernels`: torch.cat as our concatenation kernel (else PyTorch's, a measured variant);
    `attention_kernels`: scaled_dot_product_attention as our flash-attention kernel where it
    takes it (else PyTorch's fused attention, a measured variant); `batch_norm_kernels`:
    batch_norm as our statistics kernel and elementwise apply (else PyTorch's batch_norm, cuDNN's
    kernels, a measured variant); `recurrent_kernels`: RNN / LSTM / GRU stacks as our persistent
    recurrent kernel where it takes them (else cuDNN's call; the kernel is a measured variant);
    `group_norm_stats`: a group_norm only ever reduced as statistics + elementwise ops that fuse
    into its reduction (a measured variant); `contraction_kernels`: torch.einsum as our
    contraction kernel where it takes it (else torch's einsum, a measured variant)."""
    use_gemm = gemm_kernels_available() if gemm_kernels is None else gemm_kernels
    rewritten = apply_rewrites(graph, attention=attention, relu_attention=attention_kernels,
                               batch_norm=batch_norm_kernels, group_norm_stats=group_norm_stats)
    kernels = {"gemm_kernels": use_gemm, "cat_kernels": cat_kernels, "attention_kernels": attention_kernels,
               "recurrent_kernels": recurrent_kernels, "contraction_kernels": contraction_kernels}
    sched = schedule(rewritten.graph, **kernels)
    lone = lone_bias_adds(sched)
    if lone:  # nothing absorbs these bias adds: cuDNN adds the bias in its own pass instead
        rewritten = apply_rewrites(graph, keep_conv_bias=frozenset(lone), attention=attention,
                                   relu_attention=attention_kernels, batch_norm=batch_norm_kernels,
                                   group_norm_stats=group_norm_stats)
        sched = schedule(rewritten.graph, **kernels)
    builder = _StepBuilder(sched, rewritten.algebraic)
    steps = [builder.step(g, k) for k, g in enumerate(sched.groups, start=1)]
    notes = list(graph.notes) + rewritten.notes
    for g in sched.groups:
        if g.kind == "fallback":
            node = rewritten.graph.node(g.anchor)
            notes.append(f"line {node.line or '?'}: {node.op} stays in PyTorch ({g.reason})")
    if not use_gemm and any(g.kind == "library" and rewritten.graph.node(g.anchor).op
                            in ("aten.linear.default", "aten.matmul.default") for g in sched.groups):
        notes.append("GEMM kernels unavailable in this build: matmuls call PyTorch (cuBLAS)")
    idle = nothing_to_fuse(steps)
    if idle:
        notes.append(idle)
    for step in steps:
        step.channels_last = channels_last_conv(step, rewritten.graph)
    steps = layout_readers(steps, rewritten.graph, any(s.channels_last for s in steps))
    return Plan(
        module=graph.module,
        source_path=graph.source_path,
        steps=steps,
        host=host_settings(steps, rewritten.graph, sched),
        notes=notes,
        graph_edits=[e.to_json() for e in rewritten.edits],
    ).bind(graph)


def lone_bias_adds(sched: Schedule) -> list[str]:
    """Convolutions whose split-off bias add (rewrites.conv_bias) ended up a kernel of its own:
    an extra read and write of the conv output that the library call does not need."""
    adds = conv_bias_adds(sched.graph)
    return [adds[g.nodes[0]] for g in sched.groups
            if g.kind == "elementwise" and len(g.nodes) == 1 and g.nodes[0] in adds]


# ---- steps -----------------------------------------------------------------------------------

def _nbytes(meta: TensorMeta | None) -> int:
    if meta is None:
        return 0
    return meta.numel * ELEMENT_SIZE.get(meta.dtype, 4)


class _StepBuilder:
    def __init__(self, sched: Schedule, algebraic: set[str]):
        self.graph = sched.graph
        self.algebraic = algebraic

    def node(self, name: str) -> Node:
        return self.graph.node(name)

    def tensor_arg(self, name: str) -> TensorArg:
        return TensorArg(name, self.node(name).meta.dtype)

    def external_inputs(self, nodes: list[str]) -> list[str]:
        inside = set(nodes)
        found: list[str] = []
        for n in nodes:
            for r in self.node(n).refs():
                if r not in inside and r not in found:
                    found.append(r)
        return found

    def lines(self, nodes: list[str]) -> list[int]:
        return sorted({self.node(n).line for n in nodes if self.node(n).line})

    def ops(self, nodes: list[str], rename: dict[str, str] | None = None) -> list[ElementwiseOp]:
        rename = rename or {}
        out: list[ElementwiseOp] = []
        for n in nodes:
            for op in translate_elementwise(self.node(n)):
                args = tuple(rename.get(a, a) if isinstance(a, str) else a for a in op.args)
                out.append(ElementwiseOp(op.op, args, rename.get(op.out, op.out), op.attrs))
        return out

    def technique(self, g: Group, default: str) -> str:
        return "algebraic_rewrite" if any(n in self.algebraic for n in g.nodes) else default

    def step(self, g: Group, index: int) -> PlanStep:
        sid = f"s{index}"
        build = {"elementwise": self.elementwise, "reduction": self.reduction,
                 "pool": self.pool, "batch_stats": self.batch_stats, "batch_stats_merge": self.batch_stats_merge,
                 "scan": self.scan, "arg_reduce": self.arg_reduce,
                 "triangle": self.triangle, "nll": self.nll, "conv_taps": self.conv_taps, "cat": self.cat,
                 "gemm": self.gemm, "attention": self.attention,
                 "recurrent": self.recurrent, "contraction": self.contraction}.get(g.kind, self.torch_call)
        return build(g, sid)

    def elementwise(self, g: Group, sid: str) -> PlanStep:
        inputs = self.external_inputs(g.nodes)
        ops = self.ops(g.nodes)
        out_dtype = self.node(g.nodes[-1]).meta.dtype
        out_shape = self.node(g.outputs[0]).meta.shape
        # Only an operand of the output's own shape can be a channels-last conv output to tile.
        tiled = tuple(k for k, i in enumerate(inputs)
                      if 3 <= len(out_shape) <= 5 and self.node(i).meta.shape == out_shape)
        spec = ElementwiseSpec(f"ks_{sid}_elementwise", tuple(self.tensor_arg(i) for i in inputs),
                               tuple(ops), tuple(g.outputs), out_dtype, tiled_inputs=tiled)
        numel = max(self.node(n).meta.numel for n in g.outputs)
        moved = sum(_nbytes(self.node(i).meta) for i in inputs) + sum(
            _nbytes(self.node(o).meta) for o in g.outputs)
        names = ", ".join(base_op(self.node(n).op) for n in g.nodes)
        extra = f"; {len(g.outputs)} outputs" if len(g.outputs) > 1 else ""
        return PlanStep(
            id=sid, technique=self.technique(g, "fused_elementwise"), nodes=list(g.nodes),
            description=f"one elementwise kernel: {names}{extra}",
            source_lines=self.lines(g.nodes), spec=spec_to_json(spec),
            estimated_bytes=moved, estimated_flops=numel * elementwise_flops(ops),
            inputs=inputs, outputs=list(g.outputs))

    def shape_against(self, name: str, rank: int) -> tuple:
        """`name`'s shape broadcast (leading 1s) against a rank-`rank` tensor."""
        shape = tuple(self.node(name).meta.shape)
        return (1,) * (rank - len(shape)) + shape

    def fused_step(self, g: Group, sid: str, spec: ReductionSpec | PoolSpec | BatchStatsSpec,
                   description: str, moved: int, flops: int, inputs: list[str]) -> PlanStep:
        """The PlanStep of a reduction, pooling or batch-statistics group."""
        return PlanStep(
            id=sid, technique=self.technique(g, "fused_reduction"), nodes=list(g.nodes),
            description=description, source_lines=self.lines(g.nodes), spec=spec_to_json(spec),
            estimated_bytes=moved, estimated_flops=flops, inputs=inputs, outputs=[g.final])

    def ordered_prologue_inputs(self, g: Group) -> list[str]:
        """What a reduction or pooling group's prologue reads, a full-size tensor first (the
        anchor's input itself without a prologue)."""
        src = self.node(g.anchor).args[0].node
        if not g.prologue:
            return [src]
        pro_inputs = self.external_inputs(g.prologue)
        full = tuple(self.node(src).meta.shape)
        first = next(i for i in pro_inputs if tuple(self.node(i).meta.shape) == full)
        pro_inputs.remove(first)
        return [first] + pro_inputs

    def fused_parts(self, g: Group) -> str:
        parts = []
        if g.prologue:
            parts.append("prologue " + ", ".join(base_op(self.node(n).op) for n in g.prologue))
        if g.epilogue:
            parts.append("epilogue " + ", ".join(base_op(self.node(n).op) for n in g.epilogue))
        return f" with {'; '.join(parts)}" if parts else ""

    def pool(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        src = anchor.args[0].node
        src_meta = self.node(src).meta
        params = pool_params(anchor, src_meta.rank)
        nd = params["nd"]
        pro_inputs = self.ordered_prologue_inputs(g)

        # constant over the spatial dims: read once per window
        planes = [i for i in pro_inputs[1:] if all(d == 1 for d in self.shape_against(i, src_meta.rank)[-nd:])]
        epi_inputs = [i for i in self.external_inputs(g.epilogue) if i != g.anchor]
        inputs = pro_inputs + [i for i in epi_inputs if i not in pro_inputs]
        out = self.node(g.final).meta
        fused = dict(prologue=tuple(self.ops(g.prologue)), prologue_out=src if g.prologue else "",
                     epilogue=tuple(self.ops(g.epilogue, {g.anchor: "acc"})),
                     epilogue_out="acc" if not g.epilogue else g.epilogue[-1],
                     epilogue_inputs=tuple(epi_inputs), plane_inputs=tuple(planes))
        # the values a window pools (an adaptive window's: the input over the output)
        window = (math.prod(params["kernel"]) if params.get("kernel")
                  else max(1, src_meta.numel // max(1, anchor.meta.numel)))
        dilated = any(d > 1 for d in params.get("dilation") or ())
        hoisted = (hoist_monotone_tail(**fused, taps=window, dilation_over_one=dilated)
                   if params["kind"] == "max" else None)
        if hoisted is not None:  # exact (planner/monotone.py): once per output, not once per tap
            fused = {key: getattr(hoisted, key) for key in fused}
        spec = PoolSpec(name=f"ks_{sid}_{params['kind']}_pool{nd}d", inputs=tuple(self.tensor_arg(i) for i in inputs),
                        out_dtype=out.dtype, **fused, **params)
        moved = sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(out)
        flops = anchor.meta.numel * window * (elementwise_flops(list(spec.prologue)) + 1)
        flops += out.numel * elementwise_flops(list(spec.epilogue))
        what = (f"adaptive avg pooling to {list(spec.output_size)}" if spec.kind == "adaptive_avg"
                else f"{spec.kind} pooling, window {list(spec.kernel)} stride {list(spec.stride)}")
        after = f"; once per output, after the max (monotone: exact): {', '.join(hoisted.moved)}" if hoisted else ""
        return self.fused_step(g, sid, spec, f"{what}{self.fused_parts(g)}{after}", moved, flops, inputs)

    def cat(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        inside = set(g.prologue)
        inputs: list[str] = []
        segments: list[CatSegment] = []
        for ref in anchor.arg(0, "tensors"):
            chain = self.chain_of(ref.node, inside)  # the producer's nodes, in graph order
            reads = self.external_inputs(chain) if chain else [ref.node]
            if set(reads) & set(inputs):
                raise ValueError(f"{anchor.name}: a tensor is read by two segments of the cat")
            segments.append(CatSegment(tuple(range(len(inputs), len(inputs) + len(reads))),
                                       tuple(self.ops(chain)), ref.node))
            inputs += reads
        spec = CatSpec(f"ks_{sid}_cat", tuple(self.tensor_arg(i) for i in inputs), tuple(segments),
                       int(anchor.arg(1, "dim", 0)), anchor.meta.dtype)
        flops = sum(self.node(seg.out).meta.numel * elementwise_flops(list(seg.ops)) for seg in segments)
        fused = sum(1 for seg in segments if seg.ops)
        what = f"cat of {len(segments)} tensors along dim {spec.dim}" + (
            f", {fused} computed where they are stored ({', '.join(base_op(self.node(n).op) for n in g.prologue)})"
            if fused else "")
        return PlanStep(  # a copy with elementwise work in it: counted with the elementwise kernels
            id=sid, technique=self.technique(g, "fused_elementwise"), nodes=list(g.nodes),
            description=what, source_lines=self.lines(g.nodes), spec=spec_to_json(spec),
            estimated_bytes=sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(anchor.meta),
            estimated_flops=flops, inputs=inputs, outputs=[g.final])

    def chain_of(self, name: str, inside: set[str]) -> list[str]:
        """`name` and the nodes of `inside` it depends on through `inside`, in graph order."""
        if name not in inside:
            return []
        found, todo = {name}, [name]
        while todo:
            for r in self.node(todo.pop()).refs():
                if r in inside and r not in found:
                    found.add(r)
                    todo.append(r)
        return [n.name for n in self.graph.nodes if n.name in found]

    def prologue_operands(self, g: Group) -> dict:
        """The spec fields of a one-pass kernel reading its anchor's input through the group's
        prologue (scan, arg-reduce, triangle): inputs, prologue ops, the prologue's result."""
        anchor = self.node(g.anchor)
        return {"inputs": tuple(self.tensor_arg(i) for i in self.ordered_prologue_inputs(g)),
                "prologue": tuple(self.ops(g.prologue)),
                "prologue_out": anchor.args[0].node if g.prologue else ""}

    def one_pass_step(self, g: Group, sid: str, spec: ScanSpec | ArgReduceSpec | TriangleSpec,
                      what: str) -> PlanStep:
        """The step of a kernel that reads each input once and writes its output once."""
        anchor = self.node(g.anchor)
        inputs = [t.name for t in spec.inputs]
        src = self.node(anchor.args[0].node).meta
        return self.fused_step(
            g, sid, spec, f"{what}{self.fused_parts(g)}",
            sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(anchor.meta),
            src.numel * (elementwise_flops(list(spec.prologue)) + 1), inputs)

    def scan(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        kind = SCAN_KINDS[anchor.op]
        spec = ScanSpec(name=f"ks_{sid}_cum{kind}", kind=kind, dim=int(anchor.arg(1, "dim")),
                        out_dtype=anchor.meta.dtype, reverse=anchor.op in REVERSE_SCANS,
                        exclusive=anchor.op in EXCLUSIVE_SCANS, **self.prologue_operands(g))
        direction = (" from the end" if spec.reverse else "") + (", exclusive" if spec.exclusive else "")
        return self.one_pass_step(g, sid, spec, f"cumulative {kind} along dim {spec.dim}{direction}")

    def arg_reduce(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        kind = ARG_REDUCE_KINDS[anchor.op]
        dim = anchor.arg(1, "dim")
        spec = ArgReduceSpec(name=f"ks_{sid}_{kind}", kind=kind, dim=None if dim is None else int(dim),
                             keepdim=bool(anchor.arg(2, "keepdim", False)), **self.prologue_operands(g))
        over = "every element" if spec.dim is None else f"dim {spec.dim}"
        return self.one_pass_step(g, sid, spec, f"{kind} over {over}")

    def triangle(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        kind = TRIANGLE_KINDS[anchor.op]
        spec = TriangleSpec(name=f"ks_{sid}_{kind}", kind=kind, diagonal=int(anchor.arg(1, "diagonal", 0)),
                            out_dtype=anchor.meta.dtype, **self.prologue_operands(g))
        return self.one_pass_step(g, sid, spec, f"{kind} (diagonal {spec.diagonal})")

    def nll(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        x, t, lse = (a.node for a in anchor.args[:3])
        spec = NllLossSpec(
            name=f"ks_{sid}_nll", logits=self.tensor_arg(x), target=self.tensor_arg(t), lse=self.tensor_arg(lse),
            reduction=anchor.kwargs["reduction"], ignore_index=int(anchor.kwargs["ignore_index"]),
            out_dtype=anchor.meta.dtype)
        rows = self.node(t).meta.numel
        return self.fused_step(
            g, sid, spec, f"cross_entropy's negative log-likelihood (reduction {spec.reduction}) "
            "from the rows' logsumexp and the logit at each target",
            _nbytes(self.node(t).meta) + _nbytes(self.node(lse).meta) + rows * ELEMENT_SIZE[self.node(x).meta.dtype]
            + _nbytes(anchor.meta), 2 * rows, [x, t, lse])

    def conv_taps(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        x = anchor.args[0].node
        pair = lambda key: tuple(int(v) for v in anchor.kwargs[key])  # noqa: E731
        spec = ConvTapMeansSpec(
            name=f"ks_{sid}_conv_taps", input=self.tensor_arg(x), kernel=pair("kernel"), stride=pair("stride"),
            padding=pair("padding"), dilation=pair("dilation"), output_padding=pair("output_padding"),
            transposed=bool(anchor.kwargs["transposed"]))
        taps = spec.kernel[0] * spec.kernel[1]
        values = self.node(x).meta.numel
        what = "transposed convolution" if spec.transposed else "convolution"
        return self.fused_step(
            g, sid, spec, f"each {spec.kernel[0]}x{spec.kernel[1]} tap's mean input over the {what}'s "
            "output (one read of its input; the conv output is never computed)",
            _nbytes(self.node(x).meta) + _nbytes(anchor.meta), values * spec.kernel[1] + values // max(1, taps), [x])

    def attention(self, g: Group, sid: str) -> PlanStep:
        node = self.node(g.anchor)
        q, k, v = (a.node for a in node.args[:3])
        mask = node.arg(3, "attn_mask", None)
        nonzero = len(g.nodes) > 1  # the group took the `x != 0` making the mask: the kernel reads x
        mask_input = self.node(mask.node).args[0].node if nonzero else mask.node if mask is not None else None
        mq, lk = self.node(q).meta, self.node(k).meta.example_shape[-2]
        head = int(mq.shape[-1])
        scale = node.arg(6, "scale", None)
        causal = bool(node.arg(5, "is_causal", False))
        spec = AttentionSpec(
            name=f"ks_{sid}_attention", query=self.tensor_arg(q), key=self.tensor_arg(k), value=self.tensor_arg(v),
            head_dim=head, scale=float(scale) if scale is not None else 1.0 / math.sqrt(head),
            out_dtype=node.meta.dtype, causal=causal, mask=self.tensor_arg(mask_input) if mask_input else None,
            mask_nonzero=nonzero, score="relu" if node.op == RELU_ATTENTION_OP else "softmax")
        inputs = [q, k, v] + ([mask_input] if mask_input else [])
        # q k^T and p v: 2 Lq Lk D each per leading index (about half of it under a causal mask)
        flops = 4 * mq.numel * lk // (2 if causal else 1)
        what = "causal " if causal else "masked " if mask is not None else ""
        if spec.score == "relu":
            description = (f"{what}ReLU attention as one flash-style kernel (head dim {head}: key / value tiles "
                           "through shared memory, no [L, S] scores in memory)")
        else:
            description = (f"{what}scaled_dot_product_attention as one flash-attention kernel (head dim {head}: "
                           "online softmax, key / value tiles through shared memory, no [L, S] scores in memory)")
        return PlanStep(
            id=sid, technique="fused_attention", nodes=list(g.nodes), description=description,
            source_lines=self.lines([node.name]), spec=spec_to_json(spec),
            estimated_bytes=sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(node.meta),
            estimated_flops=flops, inputs=inputs, outputs=[node.name])

    def contraction(self, g: Group, sid: str) -> PlanStep:
        node = self.node(g.anchor)
        roles = contraction_roles(self.graph, node)
        assert not isinstance(roles, str), roles  # fusion classified it as one
        inputs = [r.node for r in node.arg(1, "tensors")]
        spec = replace(roles.spec, name=f"ks_{sid}_contraction", inputs=tuple(self.tensor_arg(i) for i in inputs),
                       out_dtype=node.meta.dtype)
        role = lambda letters: letters or "-"  # noqa: E731
        return self.fused_step(
            g, sid, spec, f"einsum {spec.equation} as one tiled contraction (batch {role(spec.batch)}, "
            f"m {role(spec.m)}, n {role(spec.n)}, summed {role(spec.k)}; tile {spec.tile[0]}x{spec.tile[1]}), "
            "operands read through their strides",
            sum(_nbytes(self.node(i).meta) for i in dict.fromkeys(inputs)) + _nbytes(node.meta), roles.flops, inputs)

    def recurrent(self, g: Group, sid: str) -> PlanStep:
        node = self.node(g.anchor)
        spec, inputs = recurrent_spec(self.graph, node, f"ks_{sid}_{cell_of(node)}", self.tensor_arg)
        x = self.node(inputs[0]).meta
        steps = int(x.example_shape[1] if spec.batch_first else x.example_shape[0])
        hidden = int(self.node(inputs[1]).meta.shape[-1])
        weights = sum(self.node(w).meta.numel for w in inputs[2 + (spec.cell == "lstm"):])
        batch = int(self.node(inputs[1]).meta.example_shape[1])
        stack = "bidirectional " * (spec.directions == 2) + f"{spec.layers}-layer {spec.cell}"
        order = ("layers as a wavefront (T + L - 1 dependent steps)" if spec.directions == 1 and spec.layers > 1
                 else "one launch a layer")
        return PlanStep(
            id=sid, technique="fused_recurrent", nodes=list(g.nodes),
            description=(f"the {stack} (hidden {hidden}) as one persistent kernel: each block keeps its units' "
                         f"weights in shared memory over the {steps} steps, {order}"),
            source_lines=self.lines([node.name]), spec=spec_to_json(spec),
            estimated_bytes=4 * weights + sum(_nbytes(self.node(i).meta) for i in inputs[:2]) + _nbytes(x),
            estimated_flops=2 * weights * batch * steps, inputs=inputs, outputs=[node.name])

    def batch_stats(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        pro_inputs = self.ordered_prologue_inputs(g)
        src = self.node(anchor.args[0].node).meta

        def per_channel(name: str) -> bool:  # constant over every dim but dim 1
            return all(d == 1 for k, d in enumerate(self.shape_against(name, src.rank)) if k != 1)

        running = [r.node for r in anchor.args[1:3] if isinstance(r, NodeRef)]
        if any(r in pro_inputs for r in running):
            raise ValueError(f"{anchor.name}: a running statistic is also read by the prologue")
        inputs = pro_inputs + running
        spec = BatchStatsSpec(
            name=f"ks_{sid}_batch_stats", inputs=tuple(self.tensor_arg(i) for i in inputs),
            eps=float(anchor.kwargs["eps"]), momentum=float(anchor.kwargs["momentum"]),
            prologue=tuple(self.ops(g.prologue)), prologue_out=anchor.args[0].node if g.prologue else "",
            channel_inputs=tuple(i for i in pro_inputs[1:] if per_channel(i)),
            running_mean=running[0] if running else None, running_var=running[1] if running else None,
            groups=int(anchor.kwargs.get("groups", 0)))
        what = (f"group_norm statistics per (sample, group of {src.shape[1] // spec.groups} channels)"
                if spec.groups and isinstance(src.shape[1], int) else
                "batch_norm statistics per channel (training mode"
                f"{'; updates the running statistics' if running else ''})")
        return self.fused_step(
            g, sid, spec, f"{what}{self.fused_parts(g)}",
            sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(anchor.meta),
            src.numel * (elementwise_flops(list(spec.prologue)) + 4), inputs)

    def batch_stats_merge(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        parts = [r.node for r in anchor.args[0]]
        sizes = anchor.args[1].node
        running = [r.node for r in anchor.args[2:4] if isinstance(r, NodeRef)]
        inputs = parts + [sizes] + running
        spec = BatchStatsMergeSpec(
            name=f"ks_{sid}_batch_stats_merge", inputs=tuple(self.tensor_arg(i) for i in inputs),
            parts=len(parts), eps=float(anchor.kwargs["eps"]), momentum=float(anchor.kwargs["momentum"]),
            running_mean=running[0] if running else None, running_var=running[1] if running else None)
        moved = sum(_nbytes(self.node(i).meta) for i in parts + running) + _nbytes(anchor.meta)
        return self.fused_step(
            g, sid, spec, f"batch_norm statistics of a concatenation from its {len(parts)} parts' "
                          "(training mode; updates the running statistics)", moved, 0, inputs)

    def reduction(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        kind = REDUCTION_KINDS[anchor.op]
        src = anchor.args[0].node
        pro_inputs = self.ordered_prologue_inputs(g)
        weight = bias = None
        norm_ndim, eps, groups, dim_count = 1, 1e-5, 1, 1
        if kind in ("layer_norm", "group_norm"):
            eps = norm_eps(anchor)
            w, b = norm_affine(anchor)
            weight = w.node if isinstance(w, NodeRef) else None
            bias = b.node if isinstance(b, NodeRef) else None
            dim, keepdim = -1, True
            if kind == "layer_norm":
                norm_ndim = len(anchor.arg(1, "normalized_shape"))
            else:
                dim, groups = 1, int(norm_groups(anchor, self.node(src).meta.shape[1]))
        elif kind in ("softmax", "log_softmax"):
            dim, keepdim = int(anchor.arg(1, "dim")), True
        else:
            dims = anchor.arg(1, "dim")
            dim, dim_count = (dims[0], 1) if len(dims) == 1 else reduced_dims(dims, self.node(src).meta.rank)
            keepdim = bool(anchor.arg(2, "keepdim", False))
        epi_inputs = [i for i in self.external_inputs(g.epilogue) if i != g.anchor]
        affine = [v for v in (weight, bias) if v is not None and v not in pro_inputs]
        inputs = pro_inputs + affine + [i for i in epi_inputs if i not in pro_inputs + affine]
        spec = ReductionSpec(
            name=f"ks_{sid}_{kind}", kind=kind,
            inputs=tuple(self.tensor_arg(i) for i in inputs), dim=dim, keepdim=keepdim,
            out_dtype=self.node(g.final).meta.dtype,
            prologue=tuple(self.ops(g.prologue)), prologue_out=src if g.prologue else "",
            epilogue=tuple(self.ops(g.epilogue, {g.anchor: "acc"})),
            epilogue_out="acc" if not g.epilogue else g.epilogue[-1],
            epilogue_inputs=tuple(epi_inputs), norm_ndim=norm_ndim, eps=eps,
            weight=weight, bias=bias, groups=groups, dim_count=dim_count,
            trailing=_reduces_trailing_dims(kind, dim, dim_count, self.node(src).meta.rank))
        in_numel = self.node(src).meta.numel
        moved = sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(self.node(g.final).meta)
        flops = in_numel * (elementwise_flops(list(spec.prologue)) + (5 if kind in (
            "softmax", "log_softmax", "logsumexp", "layer_norm", "group_norm") else 1))
        flops += self.node(g.final).meta.numel * elementwise_flops(list(spec.epilogue))
        fused = self.fused_parts(g)
        if kind == "layer_norm":
            where = f"over the last {norm_ndim} dim(s)"
        elif kind == "group_norm":
            where = f"over {groups} channel groups"
        elif dim_count > 1:
            where = f"over dims {dim}..{dim + dim_count - 1}"
        else:
            where = f"over dim {dim}"
        return self.fused_step(g, sid, spec, f"{kind} {where}{fused}", moved, flops, inputs)

    def gemm(self, g: Group, sid: str) -> PlanStep:
        anchor = self.node(g.anchor)
        if anchor.op == "aten.addmm.default":
            bias_ref, x, w, layout = anchor.args[0], anchor.args[1], anchor.args[2], "kn"
            bias = bias_ref.node
        else:
            x, w = anchor.args[0], anchor.args[1]
            layout = "nk" if anchor.op == "aten.linear.default" else "kn"
            b = anchor.arg(2, "bias") if anchor.op == "aten.linear.default" else None
            bias = b.node if isinstance(b, NodeRef) else g.gemm_bias
        x, w = x.node, w.node
        spec = GemmSpec(
            name=f"ks_{sid}_gemm", x=self.tensor_arg(x), weight=self.tensor_arg(w),
            bias=self.tensor_arg(bias) if bias else None, activation=g.gemm_activation,
            out_dtype=self.node(g.final).meta.dtype, weight_layout=layout)
        inputs = [x, w] + ([bias] if bias else [])
        wm = self.node(w).meta
        k_dim = wm.example_shape[1] if layout == "nk" else wm.example_shape[0]
        out = self.node(g.final).meta
        flops = 2 * out.numel * k_dim
        moved = sum(_nbytes(self.node(i).meta) for i in inputs) + _nbytes(out)
        epi = ["bias"] if bias else []
        epi += [g.gemm_activation] if g.gemm_activation != "none" else []
        return PlanStep(
            id=sid, technique="gemm_epilogue", nodes=list(g.nodes),
            description=f"{base_op(anchor.op)} through cuBLASLt"
            + (f" with fused {' + '.join(epi)} epilogue" if epi else ""),
            source_lines=self.lines(g.nodes), spec=spec_to_json(spec),
            estimated_bytes=moved, estimated_flops=flops, inputs=inputs, outputs=[g.final])

    def torch_call(self, g: Group, sid: str) -> PlanStep:
        node = self.node(g.anchor)
        technique = "library_call" if g.kind == "library" else "pytorch_fallback"
        declare = {name: technique for name in torch_ops_for(node.op)}
        inputs = [r for r in node.refs()]
        moved = sum(_nbytes(self.node(i).meta) for i in inputs) + sum(
            _nbytes(m) for m in node.outputs)
        flops = sum(m.numel for m in node.outputs if m is not None)
        if technique == "library_call" and base_op(node.op).startswith("conv"):
            # each output value (a transposed conv: each input value) meets a weight slice of
            # [C_in / groups, k...] ([C_out / groups, k...])
            wm = self.node(node.args[1].node).meta
            per = self.node(node.args[0].node).meta if "transpose" in node.op else node.meta
            flops = 2 * per.numel * math.prod(wm.example_shape[1:])
            what = f"{base_op(node.op)} through cuDNN (PyTorch)"
        elif technique == "library_call" and node.op == SDPA_OP:
            # q k^T and p v: 2 L S E + 2 L S Ev per batch entry
            q, k = self.node(node.args[0].node).meta, self.node(node.args[1].node).meta
            flops = 2 * q.numel * k.example_shape[-2] + 2 * node.meta.numel * k.example_shape[-2]
            what = "scaled_dot_product_attention through PyTorch's fused attention (flash / memory-efficient / cuDNN)"
        elif technique == "library_call":
            flops = 2 * node.meta.numel * self.node(node.args[0].node).meta.example_shape[-1]
            library = "cuDNN's recurrent kernels" if node.op in RECURRENT_LIBRARY_OPS else "cuBLAS"
            what = f"{base_op(node.op)} through {library} (PyTorch)"
        else:
            what = f"{base_op(node.op)} in PyTorch ({g.reason})"
        return PlanStep(
            id=sid, technique=technique, nodes=[node.name], description=what,
            source_lines=self.lines([node.name]),
            spec={"type": "torch_op", "op": node.op, "declare": declare},
            estimated_bytes=moved, estimated_flops=flops, inputs=inputs, outputs=[node.name])


# ---- host settings ---------------------------------------------------------------------------

def host_settings(steps: list[PlanStep], graph: Graph, sched: Schedule) -> HostSettings:
    reasons: list[str] = []
    total = sum(s.estimated_bytes for s in steps)
    launches = len(steps)
    fallbacks = [s for s in steps if s.technique == "pytorch_fallback"]
    if fallbacks:
        cuda_graph = False
        reasons.append("CUDA graph off: PyTorch fallback ops may synchronise or allocate in "
                       "ways a graph replay cannot repeat")
    elif total < CUDA_GRAPH_MAX_BYTES and launches >= CUDA_GRAPH_MIN_LAUNCHES:
        cuda_graph = True
        reasons.append(f"CUDA graph on: {launches} launches moving ~{human_bytes(total)} "
                       f"(< {human_bytes(CUDA_GRAPH_MAX_BYTES)}): launch-bound, replay removes "
                       "the per-kernel CPU overhead")
    else:
        cuda_graph = False
        why = (f"~{human_bytes(total)} moved: memory/compute time dwarfs launch overhead"
               if total >= CUDA_GRAPH_MAX_BYTES else f"only {launches} launch")
        reasons.append(f"CUDA graph off: {why}")
    convs = [s for s in steps if s.technique == "library_call" and s.spec
             and base_op(s.spec.get("op", "")).startswith("conv")]
    channels_last = any(s.channels_last for s in convs)
    if channels_last:
        reasons.append("channels_last on: the 2-D convolution runs cuDNN on an NHWC copy of its "
                       "input (on the H100, examples/conv2d_bias_relu's fp32 conv took 2.19 ms "
                       "NHWC vs 8.02 ms NCHW, the copy 0.16 ms); a fused epilogue reads the NHWC "
                       "output through 32x32 tiles and writes the contiguous result")
    elif convs:
        reasons.append("channels_last off: no 2-D convolution over a 4-D floating-point input")
    reasons.append("preallocated outputs off: the caching allocator makes per-call outputs "
                   "cheap, and fresh outputs never alias a previous call's")
    return HostSettings(cuda_graph=cuda_graph, channels_last=channels_last, preallocate_outputs=False,
                        reasons=reasons)


CHANNELS_LAST_CONV_OPS = frozenset({"aten.conv2d.default", "aten.conv2d.padding", "aten.convolution.default"})


# Convolutions whose channels-last (NHWC / NDHWC) form the planner cannot rank by rule: 3-D and
# transposed ones (Inductor's layout optimisation runs them channels-last; whether cuDNN is
# faster so depends on shape and dtype), so only the measured search tries them.
MEASURED_LAYOUT_CONV_OPS = frozenset({
    "aten.conv3d.default", "aten.conv3d.padding", "aten.conv_transpose2d.input",
    "aten.conv_transpose3d.input", "aten.convolution.default"})


def measured_layout_conv(step: PlanStep, graph: Graph) -> bool:
    """A 3-D or transposed convolution (library call or PyTorch op) of a 4-D/5-D floating-point
    input: a channels-last variant is worth measuring, never a default."""
    if step.technique not in ("library_call", "pytorch_fallback") or not step.spec:
        return False
    if step.spec.get("op") not in MEASURED_LAYOUT_CONV_OPS or channels_last_conv(step, graph):
        return False
    if not step.inputs or not graph.has(step.inputs[0]):
        return False
    meta = graph.node(step.inputs[0]).meta
    return meta is not None and meta.rank in (4, 5) and meta.dtype in (
        "float32", "float16", "bfloat16")


def layout_readers(steps: list[PlanStep], graph: Graph, channels_last: bool) -> list[PlanStep]:
    """`steps` with each reduction over every spatial dim of a 3-5-D tensor built for the layout
    it reads: where a channels-last convolution step (with `channels_last`, the plan's host
    setting) makes that tensor, or an elementwise, pooling, concatenation or group_norm step of
    such a tensor that the coder may keep NHWC, the reduction binding reads it as [N, S, C] columns
    (cuda/reduction/binding_channels_last.cpp), which needs the column kernels a reduction over
    the trailing dims is built without (`trailing`: fewer kernels to compile); otherwise the
    trailing build.  The coder then keeps the convolution's output NHWC for it."""
    nhwc = {name for s in steps if channels_last and s.channels_last for name in s.outputs}
    for step in steps:  # outputs that may stay NHWC after them (the coder decides: coder/layout.py)
        spec = step.spec or {}
        kept = spec.get("type") in ("elementwise", "pool", "cat") or (
            spec.get("type") == "reduction" and spec.get("kind") == "group_norm")  # group_norm_keeps
        if kept and len(step.outputs) == 1 and any(i in nhwc for i in step.inputs):
            nhwc.add(step.outputs[0])
    out = []
    for step in steps:
        spec = step.spec or {}
        inputs = spec.get("inputs") or []
        dim, count = spec.get("dim"), spec.get("dim_count", 1)
        meta = graph.node(inputs[0]["name"]).meta if inputs and graph.has(inputs[0].get("name", "")) else None
        spatial = (spec.get("type") == "reduction" and spec.get("kind") not in NORMALIZING_KINDS
                   and isinstance(dim, int) and meta is not None and 3 <= meta.rank <= 5
                   and dim % meta.rank == 2 and count == meta.rank - 2)
        trailing = inputs[0]["name"] not in nhwc if spatial else None
        if spatial and spec.get("trailing") != trailing:
            step = replace(step, spec={**spec, "trailing": trailing})
        out.append(step)
    return out


def channels_last_conv(step: PlanStep, graph: Graph) -> bool:
    """A library-call step cuDNN runs faster channels-last: a 2-D convolution of a 4-D
    floating-point input (the first of the step's inputs)."""
    if step.technique != "library_call" or not step.spec or step.spec.get("op") not in CHANNELS_LAST_CONV_OPS:
        return False
    if not step.inputs or not graph.has(step.inputs[0]):
        return False
    meta = graph.node(step.inputs[0]).meta
    return meta is not None and meta.rank == 4 and meta.dtype in ("float32", "float16", "bfloat16")


def _reduces_trailing_dims(kind: str, dim: int, dim_count: int, rank: int) -> bool:
    """Whether a reduction's [outer, R, inner] view has inner == 1 for every shape of this rank:
    layer_norm and group_norm always, the others when their dims end at the last."""
    if kind in ("layer_norm", "group_norm"):
        return True
    return rank > 0 and (dim % rank) + dim_count == rank
