"""Which tensors of a program stay channels-last (NHWC / NDHWC) and which readers take them so.

A channels-last convolution step (the plan's decision) makes an NHWC output.  The coder keeps it
NHWC where every reader takes it at full speed (`reads_any_layout`), else copies it back to NCHW
once (program.py); an elementwise step whose full-size inputs are all NHWC and whose readers all
take NHWC keeps its output NHWC too (`kept_elementwise`: its binding runs the kernel on the
channels-last views and returns the channels-last tensor), so conv -> batch_norm apply -> ReLU ->
conv chains never transpose.  Every kernel reads any layout correctly (operand descriptors);
these decisions are about speed only.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import NORMALIZING
from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.graph import Graph, NodeRef


class ChannelsLastReaders:
    """The layout questions of one plan bound to its graph."""

    def __init__(self, plan: Plan, graph: Graph) -> None:
        self.plan, self.graph = plan, graph
        self._materialised: set[str] | None = None  # see materialised()
        self._kept: set[str] | None = None  # see kept_elementwise()

    def rank(self, name: str) -> int | None:
        meta = self.graph.node(name).meta if self.graph.has(name) else None
        return meta.rank if meta is not None else None

    def spatially_constant(self, name: str | None, rank: int | None) -> bool:
        """Whether operand `name` of a reduction over a 3-5-D tensor of rank `rank` is constant
        along its spatial dims (sizes 1 there, right-aligned: a conv bias, a per-channel weight,
        a scalar), so the channels-last readers load it once a channel (the bindings check the
        same at run time: ks_spatially_constant; group_norm copies its input back otherwise)."""
        if name is None or rank is None:
            return False
        if not self.graph.has(name):
            return True  # a constant the plan inlines, not an operand tensor
        meta = self.graph.node(name).meta
        if meta is None:
            return False
        lead = rank - len(meta.example_shape)
        return lead >= 0 and all(size == 1 for k, size in enumerate(meta.example_shape) if k + lead >= 2)

    def reads_any_layout(self, name: str) -> bool:
        """Every reader of `name` is a kernel step that reads a channels-last operand at full
        speed: a fused elementwise step taking it as a kernel input (its binding reads a 3-5-D
        channels-last operand through (spatial, channel) tiles: ks_channels_last_operand), a
        pooling or batch-statistics step whose inputs[0] it is (read through its strides, any
        rank), or a reduction of it over the channels, the spatial dims or all but the batch (read
        with its channels last: reads_channels_last), or a channels-last convolution step whose
        input it is (its NHWC copy is then no copy); not an output (`<output>` among the users),
        view or other op.  5-D readers were
        converted back to NCDHW until 2026-11-27 though the tiled kernel took them: its first
        form was slow (bench/results/2026-11-27-h100-conv-profiles)."""
        users = self.graph.users().get(name, [])
        steps = {n: s for s in self.plan.steps for n in s.nodes}

        rank = self.rank(name)

        def fast(step) -> bool:
            spec = step.spec or {}
            first = bool(spec.get("inputs")) and spec["inputs"][0].get("name") == name
            if spec.get("type") in ("pool", "batch_stats"):  # windows / statistics over its strides
                return first
            if spec.get("type") == "reduction":  # viewed [N, S..., C], or group_norm's NHWC kernels
                # operands permuted with it (an epilogue's keep the output's shape; group_norm's
                # NHWC kernels load every other one once a channel, its [C] affine weights too)
                kind = spec.get("kind")
                skip = ({spec.get("weight"), spec.get("bias")} if kind == "group_norm"
                        else set() if kind in ("softmax", "log_softmax")
                        else set(spec.get("epilogue_inputs") or ()))
                others = [i.get("name") for i in spec["inputs"][1:] if i.get("name") not in skip] if first else []
                return (first and reads_channels_last(spec, rank)
                        and all(self.spatially_constant(o, rank) for o in others))
            if step.technique == "library_call" and step.channels_last and self.plan.host.channels_last:
                return bool(step.inputs) and step.inputs[0] == name  # its NHWC input as it is
            return step.technique == "fused_elementwise" and name in step.inputs

        # users the program never computes (a node a step's rewrite absorbed, as level2/25's
        # conv + bias add, read by the reduction through its own prologue copy) do not count
        live = [u for u in users if u in steps or not self.graph.has(u) or u in self.materialised()]
        return bool(live) and all(u in steps and fast(steps[u]) for u in live)

    def materialised(self) -> set[str]:
        """Graph nodes outside every step that the program computes: the host / view ops and
        placeholders that steps' inputs and the outputs reach through other such nodes."""
        if self._materialised is None:
            in_steps = {n for s in self.plan.steps for n in s.nodes}
            todo = [i for s in self.plan.steps for i in s.inputs]
            todo += [v.node for v in self.graph.outputs if isinstance(v, NodeRef)]
            seen: set[str] = set()
            while todo:
                name = todo.pop()
                if name in seen or name in in_steps or not self.graph.has(name):
                    continue
                seen.add(name)
                todo += self.graph.node(name).refs()
            self._materialised = seen
        return self._materialised

    def kept_elementwise(self) -> set[str]:
        """Ids of the fused elementwise steps (one output) that keep their output channels-last:
        every full-size kernel input (the output's shape) comes NHWC from a channels-last
        convolution step or another such step, and every reader of the output takes NHWC
        (reads_any_layout: never a program output or a view).  In plan order, so chains of them
        follow each other."""
        if self._kept is None:
            nhwc = {o for s in self.plan.steps if self.plan.host.channels_last and s.channels_last
                    for o in s.outputs}
            kept: set[str] = set()
            for step in self.plan.steps:
                if step.technique != "fused_elementwise" or len(step.outputs) != 1:
                    continue
                out = step.outputs[0]
                shape = self.shape(out)
                full = [i for i in step.inputs if shape is not None and self.shape(i) == shape]
                if (shape is None or not 4 <= len(shape) <= 5 or not full
                        or not all(i in nhwc for i in full) or not self.reads_any_layout(out)):
                    continue
                kept.add(step.id)
                nhwc.add(out)
            self._kept = kept
        return self._kept

    def shape(self, name: str) -> tuple[int, ...] | None:
        meta = self.graph.node(name).meta if self.graph.has(name) else None
        return tuple(meta.example_shape) if meta is not None else None


def reads_channels_last(spec: dict, rank: int | None) -> bool:
    """A reduction of a 3-5-D tensor whose binding reads a channels-last input at full speed:
    viewed [N, S..., C] (reduction/binding_channels_last.cpp; not a normalisation, whose output
    has the input's shape) over dim 1 alone (rows of C), over every spatial dim (columns; only
    when built with its column kernels, i.e. not `trailing`: planner.builtin.layout_readers) or
    over all but dim 0; a group_norm (reduction/gn_nhwc.cu, when its other operands are
    constant along the spatial dims; its binding copies the input to NCHW otherwise); a softmax
    kind over the channels (reduction/softmax_nhwc.cu, the same condition, checked by the
    caller: ChannelsLastReaders.spatially_constant).  Over more than 256 channels both bindings
    copy the input to NCHW."""
    dim, count = spec.get("dim"), spec.get("dim_count", 1)
    if spec.get("kind") == "group_norm":  # its NHWC kernels (gn_nhwc.cu; else its binding copies)
        return rank is not None and 3 <= rank <= 5
    if spec.get("kind") in ("softmax", "log_softmax"):  # over the channels: softmax_nhwc.cu
        return (rank is not None and 3 <= rank <= 5 and isinstance(dim, int) and dim % rank == 1
                and count == 1 and not spec.get("trailing"))
    if rank is None or not 3 <= rank <= 5 or spec.get("kind") in NORMALIZING or not isinstance(dim, int):
        return False
    dim %= rank
    if dim == 1:
        return count in (1, rank - 1)
    return dim == 2 and count == rank - 2 and not spec.get("trailing")
