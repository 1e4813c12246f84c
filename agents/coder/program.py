"""The body of ModelNew.forward: a straight-line program over the plan's steps.

Values are locals named `v_<node>`.  Kernel steps call the compiled extension (`_KS.<fn>`),
library/fallback steps call the exact ATen overload the graph recorded
(`torch.ops.aten.conv2d.default(...)`), and view/size ops are emitted on demand, right before
the first statement that needs them (they are PyTorch calls that move no data).
"""

from __future__ import annotations

import keyword
import math
from typing import Any

from kernelstitch.agents.coder.codegen.conv_split import SPLIT_CAT_FUNCTION
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.layout_swap import LAYOUT_SWAP_FUNCTION
from kernelstitch.agents.coder.codegen.reduction.context import NORMALIZING
from kernelstitch.agents.plan import Plan
from kernelstitch.agents.plan.graph import DTypeConst, Graph, Node, NodeRef, OpaqueConst
from kernelstitch.agents.plan.host_ops import VIEW_OPS, is_host
from kernelstitch.agents.plan.library_ops import CONV_OPS


class CoderError(Exception):
    """The plan cannot be turned into a program (a bug in the plan or an unsupported op)."""


# View ops spelled as tensor methods when the node has no kwargs (reads better than torch.ops).
_METHODS = {
    "aten.view.default": "view", "aten.reshape.default": "reshape",
    "aten._unsafe_view.default": "reshape", "aten.permute.default": "permute",
    "aten.transpose.int": "transpose", "aten.t.default": "t",
    "aten.unsqueeze.default": "unsqueeze", "aten.squeeze.dim": "squeeze",
    "aten.squeeze.default": "squeeze", "aten.expand.default": "expand",
    "aten.flatten.using_ints": "flatten", "aten.contiguous.default": "contiguous",
    "aten.clone.default": "clone", "aten.detach.default": "detach",
    "aten.select.int": "select", "aten.unflatten.int": "unflatten",
}
_OPERATORS = {"operator.add": "+", "operator.sub": "-", "operator.mul": "*",
              "operator.floordiv": "//", "operator.truediv": "/", "operator.mod": "%",
              "operator.pow": "**", "operator.eq": "==", "operator.ne": "!=",
              "operator.lt": "<", "operator.le": "<=", "operator.gt": ">", "operator.ge": ">="}


def local(name: str) -> str:
    return f"v_{name}"


def attribute_path(target: str, kind: str) -> str:
    """`self.fc1.weight`, or `self.get_parameter("layers.0.weight")` for non-identifiers."""
    parts = target.split(".")
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        return "self." + ".".join(parts)
    getter = "get_parameter" if kind == "parameter" else "get_buffer"
    return f"self.{getter}({target!r})"


def python_number(value: Any) -> str:
    """A number or nested lists of numbers as Python source (non-finite floats spelled out)."""
    if isinstance(value, list):
        return "[" + ", ".join(python_number(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, (bool, int, float)):
        return repr(value)
    raise CoderError(f"cannot spell the constant value {value!r}")


def constant_buffer(node: Node) -> tuple[str, str]:
    """(buffer name, expression) materialising a tensor constant the graph holds inline."""
    meta, ph = node.meta, node.placeholder
    if meta is None or ph is None or ph.value is None:
        raise CoderError(f"tensor constant {node.name!r} has no value in the graph")
    target = "".join(c if c.isalnum() or c == "_" else "_" for c in (ph.target or node.name))
    expr = f"torch.tensor({python_number(ph.value)}, dtype=torch.{meta.dtype})"
    if meta.numel == 0:
        expr += f".reshape({list(meta.example_shape)!r})"
    return f"_ks_const_{target}", expr


class Program:
    def __init__(self, plan: Plan, graph: Graph, kernels: dict[str, KernelSource]):
        self.plan, self.graph, self.kernels = plan, graph, kernels
        self.lines: list[str] = []
        self.defined: set[str] = set()
        self.produced_by_step = {o: s.id for s in plan.steps for o in s.outputs}
        self._materialised: set[str] | None = None  # see materialised()
        self.uses_device = False
        self.splits_convolutions = False  # a 3xTF32 convolution calls the splitting pass
        # Programs with a convolution carry the layout copy whether or not they call it: the
        # search's layout variants then build one extension, not two (its build is keyed by
        # the source text, and most of a build is the step kernels they share).
        self.swaps_layouts = False
        self.torch_ops: dict[str, str] = {}
        # constant placeholder -> (buffer name, expression building it): ModelNew.__init__
        # registers each constant the program reads once, as a non-persistent buffer
        self.constants: dict[str, tuple[str, str]] = {}
        self.defined.update(n.name for n in graph.user_inputs())  # forward's arguments

    # ---- values ------------------------------------------------------------------------------
    def literal(self, value: Any) -> str:
        if isinstance(value, NodeRef):
            self.ensure(value.node)
            return local(value.node)
        if isinstance(value, list):
            return "[" + ", ".join(self.literal(v) for v in value) + "]"
        if isinstance(value, DTypeConst):
            return f"torch.{value.name}"
        if isinstance(value, OpaqueConst):
            text = value.text
            if text == "meta" or text.startswith("meta"):
                self.uses_device = True
                return "_device"
            if text.startswith("torch.") and text.replace(".", "").replace("_", "").isalnum():
                return text
            raise CoderError(f"cannot spell the argument {text!r} in Python")
        if isinstance(value, float) and not math.isfinite(value):
            return f'float("{value}")'
        return repr(value)

    def call_args(self, node: Node, skip: int = 0) -> str:
        """The node's arguments after its first `skip` positional ones, as call text."""
        args = [self.literal(a) for a in node.args[skip:]]
        args += [f"{k}={self.literal(v)}" for k, v in node.kwargs.items()]
        return ", ".join(args)

    def emit(self, text: str, node: Node | None = None) -> None:
        where = f"  # line {node.line}" if node is not None and node.line else ""
        self.lines.append(text + where)

    def ensure(self, name: str) -> None:
        """Define `v_<name>` (emitting view/size ops and placeholders on demand)."""
        if name in self.defined:
            return
        node = self.graph.node(name)
        if node.is_placeholder:
            ph = node.placeholder
            if ph.kind == "input":
                raise CoderError(f"input {name!r} is not a forward argument")
            if ph.kind == "constant":
                self.constants[name] = constant_buffer(node)
                self.emit(f"{local(name)} = self.{self.constants[name][0]}")
            else:
                self.emit(f"{local(name)} = {attribute_path(ph.target, ph.kind)}")
        elif is_host(node):
            self.emit(f"{local(name)} = {self.host_expression(node)}", node)
        elif name in self.produced_by_step:
            raise CoderError(f"{name!r} is read before step {self.produced_by_step[name]} "
                             "produces it (steps out of order)")
        else:
            raise CoderError(f"no plan step produces {name!r} ({node.op})")
        self.defined.add(name)

    def host_expression(self, node: Node) -> str:
        op = node.op
        if op == "getitem":
            return f"{self.literal(node.args[0])}[{self.literal(node.args[1])}]"
        if op == "aten.sym_size.int":
            return f"{self.literal(node.args[0])}.size({self.literal(node.args[1])})"
        if op == "aten.sym_numel.default":
            return f"{self.literal(node.args[0])}.numel()"
        if op == "aten.sym_stride.int":
            return f"{self.literal(node.args[0])}.stride({self.literal(node.args[1])})"
        if op in _OPERATORS:
            a, b = (self.literal(x) for x in node.args)
            return f"({a} {_OPERATORS[op]} {b})"
        if op == "operator.neg":
            return f"(-{self.literal(node.args[0])})"
        if op in ("aten.dropout.default", "aten.feature_dropout.default"):
            return self.literal(node.args[0])  # identity (eval mode or p == 0)
        if op in _METHODS and not node.kwargs:
            return f"{self.literal(node.args[0])}.{_METHODS[op]}({self.call_args(node, 1)})"
        if op in VIEW_OPS or op.startswith("aten."):
            return f"torch.ops.{op}({self.call_args(node)})"
        if op.startswith(("operator.", "math.")):
            module, _, fn = op.partition(".")
            return f"{module}.{fn}({self.call_args(node)})"
        raise CoderError(f"cannot emit {op} ({node.name})")

    # ---- steps -------------------------------------------------------------------------------
    def step(self, step) -> None:
        for value in step.inputs:
            self.ensure(value)
        node = self.graph.node(step.outputs[0]) if step.outputs else None
        if step.is_kernel:
            kernel = self.kernels[step.id]
            args = ", ".join(local(v) for v in step.inputs)
            targets = ", ".join(local(o) for o in step.outputs)
            self.lines.append(f"# {step.id}: {step.description}")
            self.emit(f"{targets} = _KS.{kernel.function}({args})", node)
        else:
            op_node = self.graph.node(step.nodes[0])
            self.lines.append(f"# {step.id}: {step.description}")
            for name, kind in (step.spec or {}).get("declare", {}).items():
                self.torch_ops[name] = kind
            if (step.spec or {}).get("split_tf32"):
                self.split_convolution(op_node)
            else:
                self.library_call(step, op_node)
        self.defined.update(step.outputs)

    def library_call(self, step, op_node: Node) -> None:
        """A PyTorch op the plan leaves to its library (cuDNN, cuBLAS), in channels-last layout
        where the step asks for it."""
        args = self.call_args(op_node)
        self.swaps_layouts |= op_node.op in CONV_OPS
        channels_last = self.plan.host.channels_last and step.channels_last
        if channels_last:  # cuDNN's NHWC / NDHWC kernels (see the plan's host reasons)
            # our tiled copy: what x.contiguous(memory_format=torch.channels_last[_3d]) gives
            first, _, rest = args.partition(", ")
            args = f"_KS.{LAYOUT_SWAP_FUNCTION}({first}, True), {rest}"
        self.emit(f"{local(op_node.name)} = torch.ops.{op_node.op}({args})", op_node)
        # Fused elementwise kernels read a channels-last operand (NHWC or NDHWC) through
        # (spatial, channel) tiles; pooling kernels slide their windows over it through its strides.
        if channels_last and not self.reads_any_layout(op_node.name):
            self.emit(f"{local(op_node.name)} = _KS.{LAYOUT_SWAP_FUNCTION}({local(op_node.name)}, False)  "
                      "# NHWC back to NCHW: read by more than fused elementwise kernels")

    def split_convolution(self, node: Node) -> None:
        """A transposed convolution as 3xTF32 (the plan's measured variant): input and weight
        split into TF32-exact high parts and fp32 remainders by our kernel, laid side by side
        along the input channels ([x_lo, x_hi, x_hi] and [W_hi, W_lo, W_hi]: a transposed
        convolution's weight has them in dim 0), then one cuDNN convolution with TF32 allowed
        for that call only (_CudnnTf32)."""
        x, w = (self.literal(a) for a in node.args[:2])
        out = local(node.name)
        args = ", ".join(filter(None, [f"{out}_x3", f"{out}_w3", self.call_args(node, 2)]))
        self.emit(f"{out}_x3 = _KS.{SPLIT_CAT_FUNCTION}({x}, 1, False)  # [x_lo, x_hi, x_hi] along the channels", node)
        self.emit(f"{out}_w3 = _KS.{SPLIT_CAT_FUNCTION}({w}, 0, True)  # [W_hi, W_lo, W_hi]", node)
        self.emit("with _CudnnTf32():", node)
        self.emit(f"    {out} = torch.ops.{node.op}({args})", node)
        self.splits_convolutions = True

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
        with its channels last: reads_channels_last); not an output (`<output>` among the users),
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

    def root(self, name: str) -> str:
        """Follow view ops back to the value whose memory they share."""
        node = self.graph.node(name)
        while (node.op in VIEW_OPS and node.op not in ("aten.clone.default", "aten._to_copy.default")
               and node.args and isinstance(node.args[0], NodeRef)):
            node = self.graph.node(node.args[0].node)
        return node.name

    def returns(self) -> str:
        values, seen_roots = [], set()
        for value in self.graph.outputs:
            if not isinstance(value, NodeRef):
                values.append(self.literal(value))
                continue
            self.ensure(value.node)
            root = self.root(value.node)
            text = local(value.node)
            # Never hand out memory the caller owns (inputs, parameters) or one buffer twice.
            if self.graph.node(root).is_placeholder or root in seen_roots:
                text += ".clone()"
            seen_roots.add(root)
            values.append(text)
        if self.graph.output_is_tuple:
            return "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"
        return values[0]

    def build(self) -> list[str]:
        for step in self.plan.steps:
            self.step(step)
        self.lines.append(f"return {self.returns()}")
        if self.uses_device:
            first = self.graph.user_inputs()
            device = f"{local(first[0].name)}.device" if first else 'torch.device("cuda")'
            self.lines.insert(0, f"_device = {device}")
        return self.lines


def reads_channels_last(spec: dict, rank: int | None) -> bool:
    """A reduction of a 3-5-D tensor whose binding reads a channels-last input at full speed:
    viewed [N, S..., C] (reduction/binding_channels_last.cpp; not a normalisation, whose output
    has the input's shape) over dim 1 alone (rows of C), over every spatial dim (columns; only
    when built with its column kernels, i.e. not `trailing`: planner.builtin.layout_readers) or
    over all but dim 0; a group_norm (reduction/gn_nhwc.cu, when its other operands are
    constant along the spatial dims; its binding copies the input to NCHW otherwise); a softmax
    kind over the channels (reduction/softmax_nhwc.cu, the same condition, checked by the
    caller: Program.spatially_constant).  Over more than 256 channels both bindings
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
