"""Which tensors of a program stay channels-last (NHWC / NDHWC) and which readers take them so.

A channels-last convolution step (the plan's decision) makes an NHWC output, and an elementwise,
pooling or concatenation step can keep its output NHWC when its inputs are (their bindings run
on the channels-last views, or store in the input's memory order).  The tensors that stay NHWC
are the largest set of such outputs whose every reader takes NHWC at full speed
(`channels_last_tensors`, a fixed point: a concatenation reads NHWC at full speed only when all
of its inputs stay NHWC); a convolution output outside it is copied back to NCHW once
(program.py), a step outside it writes NCHW.  Forward's NCHW arguments join the set, copied to
NHWC once at the program's start, where that saves work (input_pays: a DenseNet block's cats
of its input, an Inception module's pooling beside its convolutions).  So conv -> batch_norm
apply -> ReLU -> conv chains, and DenseNet's concatenations, never transpose.  Every kernel reads any layout correctly
(operand descriptors): these decisions are about speed only.
"""

from __future__ import annotations

from kernelstitch.agents.coder.codegen.reduction.context import NORMALIZING
from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.graph import Graph, NodeRef
from kernelstitch.agents.plan.host_ops import is_host

# group_norm's NHWC statistics kernel takes one channel a thread of its 256 (ks_shared_types.h's
# KS_GN_NHWC_MAX_C); its binding copies wider inputs to NCHW.
GN_NHWC_MAX_CHANNELS = 256

# Host ops the program emits as the same tensor (program.py: identity dropout is its input), so a
# tensor's layout passes through them: DenseNet's dropout(p=0) between a conv and the cats.
_ALIAS_OPS = frozenset({"aten.dropout.default", "aten.feature_dropout.default", "aten.alias.default",
                        "aten.detach.default"})


class ChannelsLastReaders:
    """The layout questions of one plan bound to its graph."""

    def __init__(self, plan: Plan, graph: Graph) -> None:
        self.plan, self.graph = plan, graph
        self._materialised: set[str] | None = None  # see materialised()
        self._nhwc: set[str] | None = None  # see channels_last_tensors()
        # The graph's readers and the step of each node, computed once: the fixed point asks for
        # them per tensor and round (DenseNet201: 813 walks of its graph, 11 of 32 s of generate)
        self._users: dict[str, list[str]] | None = None
        self._step_of_node: dict[str, object] | None = None

    def users(self) -> dict[str, list[str]]:
        if self._users is None:
            self._users = self.graph.users()
        return self._users

    def step_of_node(self) -> dict[str, object]:
        if self._step_of_node is None:
            self._step_of_node = {n: s for s in self.plan.steps for n in s.nodes}
        return self._step_of_node

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

    def reads_any_layout(self, name: str, nhwc: set[str] | None = None) -> bool:
        """Every reader of `name` is a kernel step that reads a channels-last operand at full
        speed: a fused elementwise step taking it as a kernel input (its binding reads a 3-5-D
        channels-last operand through (spatial, channel) tiles: ks_channels_last_operand), a
        pooling or batch-statistics step whose inputs[0] it is (read through its strides, any
        rank), a merge of statistics (it reads the tensor's sizes only), or a reduction of it over the channels, the spatial dims or all but the batch (read
        with its channels last: reads_channels_last), a channels-last convolution step whose
        input it is (its NHWC copy is then no copy), or a concatenation along the channels whose
        inputs are all in `nhwc`; not an output (`<output>` among the users),
        view or other op.  5-D readers were
        converted back to NCDHW until 2026-11-27 though the tiled kernel took them: its first
        form was slow (bench/results/2026-11-27-h100-conv-profiles)."""
        users = self.users().get(name, [])
        steps = self.step_of_node()

        def fast(step) -> bool:
            spec = step.spec or {}
            first = bool(spec.get("inputs")) and spec["inputs"][0].get("name") == name
            if spec.get("type") in ("pool", "batch_stats"):  # windows / statistics over its strides
                return first
            if spec.get("type") == "batch_stats_merge":  # reads only the sizes of a full-size tensor
                return True
            if spec.get("type") == "reduction":
                return self.reduction_reads_nhwc(spec, name, nhwc)
            if step.technique == "library_call" and step.channels_last and self.plan.host.channels_last:
                return bool(step.inputs) and step.inputs[0] == name  # its NHWC input as it is
            if spec.get("type") == "cat":  # rows of channels, when every input stays NHWC
                # (into an NCHW output, a fire or inception module's last cat, through its tiled
                # transposing kernel: the output-order walk gathered the inputs at a stride of C)
                return nhwc is not None and self.cat_inputs_channels_last(step, nhwc)
            return step.technique == "fused_elementwise" and name in step.inputs

        # users the program never computes (a node a step's rewrite absorbed, as level2/25's
        # conv + bias add, read by the reduction through its own prologue copy) do not count;
        # an alias (identity dropout) reads it as fast as its own readers do
        live = [u for u in users if u in steps or not self.graph.has(u) or u in self.materialised()]
        return bool(live) and all(
            fast(steps[u]) if u in steps else self.is_alias(u) and self.reads_any_layout(u, nhwc)
            for u in live)

    def reduction_reads_nhwc(self, spec: dict, name: str, nhwc: set[str] | None) -> bool:
        """A reduction step reads NHWC `name` at full speed: its input (inputs[0]) when it is
        viewed [N, S..., C] (reads_channels_last) and its other operands allow that view; or,
        for the reduce kinds (binding_channels_last.cpp permutes every operand but the
        epilogue's with the input), a full-size operand beside an NHWC input.  group_norm's and
        softmax's NHWC kernels load every other operand once a channel, so those must be
        constant along the spatial dims (as a reduce kind's are unless NHWC themselves)."""
        names = [i.get("name") for i in spec.get("inputs") or []]
        if not names:
            return False
        others = viewed_operands(spec)
        permuted = spec.get("kind") not in NORMALIZING  # a reduce kind: its operands are viewed with the input

        def stays_nhwc(o: str | None) -> bool:  # full-size (the input's shape) and NHWC
            return (permuted and nhwc is not None and self.resolve(o) in nhwc
                    and self.shape(self.resolve(o)) == self.shape(names[0]))

        rank = self.rank(names[0])
        if names[0] != name and not (name in others and stays_nhwc(name) and stays_nhwc(names[0])):
            return False
        return reads_channels_last(spec, rank) and all(
            self.spatially_constant(o, rank) or stays_nhwc(o) for o in others)

    def is_alias(self, name: str) -> bool:
        """A host op the program emits as its input tensor itself (_ALIAS_OPS)."""
        if not self.graph.has(name):
            return False
        node = self.graph.node(name)
        return (node.op in _ALIAS_OPS and is_host(node) and bool(node.args)
                and isinstance(node.args[0], NodeRef))

    def resolve(self, name: str | None) -> str | None:
        """The tensor `name` is, through aliases."""
        while name is not None and self.is_alias(name):
            name = self.graph.node(name).args[0].node
        return name

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

    def channels_last_tensors(self) -> set[str]:
        """The step outputs that stay NHWC: start from every output that can be NHWC (channels-
        last convolutions; elementwise, pooling and concatenation steps whose inputs can be), then
        drop, until nothing changes, each whose readers do not all take NHWC given the rest
        (reads_any_layout) or whose step's inputs no longer all stay NHWC."""
        if self._nhwc is None:
            producers = {s.outputs[0]: s for s in self.plan.steps if len(s.outputs) == 1}
            inputs = self.swappable_inputs()
            nhwc: set[str] = set(inputs)
            for step in self.plan.steps:  # plan order: inputs before the steps that read them
                if self.can_keep(step, nhwc):
                    nhwc.add(step.outputs[0])
            changed = True
            while changed:
                changed = False
                for name in sorted(nhwc):
                    step = producers.get(name)
                    keep = (self.input_pays(name, nhwc) if name in inputs
                            else step is not None and self.can_keep(step, nhwc))
                    if not keep or not self.reads_any_layout(name, nhwc):
                        nhwc.discard(name)
                        changed = True
            self._nhwc = nhwc
        return self._nhwc

    def swappable_inputs(self) -> set[str]:
        """Forward's 4-5-D arguments that a concatenation along the channels or a channels-last
        convolution reads: candidates for one NHWC copy at the program's start (swapped_inputs).
        A DenseNet block concatenates its NCHW input with every layer's NHWC conv output:
        without the copy each cat would read it transposed, and every layer's batch_norm, ReLU
        and conv would run NCHW with two layout copies around the conv.  An Inception module's
        convolutions copy their input to NHWC anyway: its max pooling branch then reads that
        copy and stays NHWC for its own conv instead of pooling NCHW and copying the result."""
        convs = {s.inputs[0] for s in self.plan.steps if self.is_conv(s) and s.inputs}
        return {n.name for n in self.graph.user_inputs()
                if n.meta is not None and 4 <= n.meta.rank <= 5
                and (n.name in convs or self.cats_reading(n.name))}

    def cats_reading(self, name: str) -> list:
        """The concatenation steps with tensor `name` (through aliases) among their inputs."""
        return [s for s in self.plan.steps if (s.spec or {}).get("type") == "cat"
                and name in (self.resolve(i.get("name")) for i in s.spec.get("inputs") or [])]

    def input_pays(self, name: str, nhwc: set[str]) -> bool:
        """Whether copying forward's argument `name` to NHWC saves work: a channels-last
        convolution reads it (which copies it anyway) and so do other steps (read by
        convolutions only, the copy stays theirs: program.library_call), or a concatenation
        reading it then takes NHWC inputs only, one of them made channels-last by a convolution
        (directly or through kept steps; a cat of the input with an elementwise function of it
        alone would only move the copy)."""
        readers = [s for s in self.plan.steps if name in s.inputs]
        convs = [s for s in readers if self.is_conv(s) and s.inputs[0] == name]
        if convs and len(readers) > len(convs):
            return True
        rooted = self.conv_rooted(nhwc)
        return any(self.cat_inputs_channels_last(s, nhwc)
                   and any(self.resolve(i.get("name")) in rooted for i in s.spec.get("inputs") or [])
                   for s in self.cats_reading(name))

    def conv_rooted(self, nhwc: set[str]) -> set[str]:
        """The tensors of `nhwc` a channels-last convolution makes, or a kept step makes from one."""
        rooted: set[str] = set()
        for step in self.plan.steps:  # plan order: producers first
            if step.outputs and step.outputs[0] in nhwc and (
                    self.is_conv(step) or any(self.resolve(i) in rooted for i in step.inputs)):
                rooted.add(step.outputs[0])
        return rooted

    def swapped_inputs(self) -> list[str]:
        """Forward's arguments the program copies to NHWC once, at its start (ks_layout_swap)."""
        nhwc = self.channels_last_tensors()
        return [n.name for n in self.graph.user_inputs() if n.name in nhwc]

    def kept_steps(self) -> set[str]:
        """Ids of the elementwise, pooling, concatenation and group_norm steps whose output stays
        NHWC (the coder sets their specs' keep_channels_last)."""
        nhwc = self.channels_last_tensors()
        return {s.id for s in self.plan.steps if not self.is_conv(s) and s.outputs and s.outputs[0] in nhwc}

    def transposing_cats(self) -> set[str]:
        """Ids of the concatenation steps whose inputs stay NHWC but whose output does not (the
        coder asks for their tiled transposing kernel: kernel.cu's `_tr_kernel`)."""
        nhwc = self.channels_last_tensors()
        return {s.id for s in self.plan.steps
                if (s.spec or {}).get("type") == "cat" and s.outputs and s.outputs[0] not in nhwc
                and self.cat_inputs_channels_last(s, nhwc)}

    def is_conv(self, step) -> bool:
        return bool(self.plan.host.channels_last and step.channels_last)

    def can_keep(self, step, nhwc: set[str]) -> bool:
        """Whether `step` makes an NHWC output when the tensors in `nhwc` are NHWC: a channels-
        last convolution; one fused elementwise output of rank 4-5 whose full-size inputs are all
        NHWC; a pooling of an NHWC input; a concatenation along the channels of NHWC inputs; a
        group_norm on its NHWC kernels (group_norm_keeps)."""
        if self.is_conv(step):
            return len(step.outputs) == 1
        if len(step.outputs) != 1:
            return False
        shape = self.shape(step.outputs[0])
        if shape is None or not 4 <= len(shape) <= 5:
            return False
        spec = step.spec or {}
        if step.technique == "fused_elementwise" and spec.get("type") == "elementwise":
            full = [i for i in step.inputs if self.shape(i) == shape]
            return bool(full) and all(self.resolve(i) in nhwc for i in full)
        if spec.get("type") == "pool":
            inputs = spec.get("inputs") or []
            return bool(inputs) and self.resolve(inputs[0].get("name")) in nhwc
        if spec.get("type") == "cat":
            return self.cat_inputs_channels_last(step, nhwc)
        if spec.get("type") == "reduction" and spec.get("kind") == "group_norm":
            return self.group_norm_keeps(spec, shape, nhwc)
        return False

    def group_norm_keeps(self, spec: dict, shape: tuple[int, ...], nhwc: set[str]) -> bool:
        """A group_norm of an NHWC input that its binding runs on the NHWC kernels (gn_nhwc.cu:
        every other operand constant along the spatial dims, at most KS_GN_NHWC_MAX_C channels,
        N within a grid dim): they can store the output channels-last as they read the input."""
        names = [i.get("name") for i in spec.get("inputs") or []]
        return (bool(names) and self.resolve(names[0]) in nhwc and shape[1] <= GN_NHWC_MAX_CHANNELS
                and shape[0] <= 65535 and all(self.spatially_constant(o, len(shape)) for o in viewed_operands(spec)))

    def cat_inputs_channels_last(self, step, nhwc: set[str]) -> bool:
        """A concatenation along the channels (dim 1) of 4-5-D tensors that are all NHWC or
        constant along the spatial dims, one NHWC at least (the binding's runtime check:
        ks_inputs_channels_last)."""
        spec = step.spec or {}
        rank = self.rank(step.outputs[0]) if step.outputs else None
        dim = spec.get("dim")
        if rank is None or not 4 <= rank <= 5 or not isinstance(dim, int) or dim % rank != 1:
            return False
        names = [self.resolve(i.get("name")) for i in spec.get("inputs") or []]
        return any(n in nhwc for n in names) and all(
            n in nhwc or self.spatially_constant(n, rank) for n in names)

    def shape(self, name: str) -> tuple[int, ...] | None:
        meta = self.graph.node(name).meta if self.graph.has(name) else None
        return tuple(meta.example_shape) if meta is not None else None


def viewed_operands(spec: dict) -> list[str | None]:
    """A reduction spec's operands after inputs[0] that its channels-last bindings read with the
    input's view: not group_norm's [C] affine vectors (viewed [C, 1, ...]), not a reduce kind's
    epilogue operands (they keep the output's shape); every other operand of a softmax kind."""
    kind = spec.get("kind")
    skip = ({spec.get("weight"), spec.get("bias")} if kind == "group_norm"
            else set() if kind in ("softmax", "log_softmax")
            else set(spec.get("epilogue_inputs") or ()))
    return [i.get("name") for i in (spec.get("inputs") or [])[1:] if i.get("name") not in skip]


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
