"""The body of ModelNew.forward: a straight-line program over the plan's steps.

Values are locals named `v_<node>`.  Kernel steps call the compiled extension (`_KS.<fn>`),
library/fallback steps call the exact ATen overload the graph recorded
(`torch.ops.aten.conv2d.default(...)`), and view/size ops are emitted on demand, right before
the first statement that needs them (they are PyTorch calls that move no data).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from kernelstitch.agents.coder.codegen.conv_split import SPLIT_CAT_FUNCTION
from kernelstitch.agents.coder.codegen.kernel_source import KernelSource
from kernelstitch.agents.coder.codegen.layout_swap import LAYOUT_SWAP_FUNCTION
from kernelstitch.agents.coder.layout import ChannelsLastReaders
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


# The generated forward reads parameters and buffers from `_t`, ModelNew's table of them by
# dotted name (wrapper.py's _ks_tensors over _TensorSlots: slots re-read each call, the module
# walked again only after a registration): attribute chains and get_parameter cost ~4 us of
# Python per tensor per call (6.2 ms a call for DenseNet201's 516 on the VM).
TENSOR_TABLE = "_t"


def tensor_lookup(target: str) -> str:
    """`_t['layers.0.weight']`: a parameter or buffer by its dotted name."""
    return f"{TENSOR_TABLE}[{target!r}]"


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
    def __init__(self, plan: Plan, graph: Graph, kernels: dict[str, KernelSource],
                 layout: ChannelsLastReaders | None = None):
        self.plan, self.graph, self.kernels = plan, graph, kernels
        self.lines: list[str] = []
        self.defined: set[str] = set()
        self.produced_by_step = {o: s.id for s in plan.steps for o in s.outputs}
        self.layout = layout or ChannelsLastReaders(plan, graph)
        # channels-last convolutions per input tensor: one NHWC copy serves them all (an
        # Inception module's branches, a ResNet block's conv and downsample)
        self._cl_readers = Counter(s.inputs[0] for s in plan.steps
                                   if plan.host.channels_last and s.channels_last and s.inputs)
        self._nhwc_copies: dict[str, str] = {}
        # forward's arguments copied to NHWC at the start (layout.swapped_inputs): their
        # convolutions read them as they are
        self._swapped_inputs = self.layout.swapped_inputs()
        self.uses_device = False
        self.uses_tensor_table = False
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
                self.uses_tensor_table = True
                self.emit(f"{local(name)} = {tensor_lookup(ph.target)}")
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
            args = kernel.call_arguments([local(v) for v in step.inputs])
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
            source = step.inputs[0] if step.inputs else None
            if source in self._swapped_inputs:
                pass  # NHWC since the program's start
            elif source is not None and self._cl_readers[source] > 1:
                copy = self._nhwc_copies.get(source)
                if copy is None:
                    copy = self._nhwc_copies[source] = f"_ks_nhwc_{first}"
                    self.emit(f"{copy} = _KS.{LAYOUT_SWAP_FUNCTION}({first}, True)  # NHWC once for its "
                              f"{self._cl_readers[source]} convolutions")
                args = f"{copy}, {rest}"
            else:
                args = f"_KS.{LAYOUT_SWAP_FUNCTION}({first}, True), {rest}"
        self.emit(f"{local(op_node.name)} = torch.ops.{op_node.op}({args})", op_node)
        # Fused elementwise kernels read a channels-last operand (NHWC or NDHWC) through
        # (spatial, channel) tiles; pooling kernels slide their windows over it through its strides.
        if channels_last and op_node.name not in self.layout.channels_last_tensors():
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
        for name in self._swapped_inputs:
            self.swaps_layouts = True
            self.lines.append(f"{local(name)} = _KS.{LAYOUT_SWAP_FUNCTION}({local(name)}, True)  "
                              "# NHWC once: every reader takes it channels-last")
        for step in self.plan.steps:
            self.step(step)
        self.lines.append(f"return {self.returns()}")
        if self.uses_device:
            first = self.graph.user_inputs()
            device = f"{local(first[0].name)}.device" if first else 'torch.device("cuda")'
            self.lines.insert(0, f"_device = {device}")
        if self.uses_tensor_table:
            self.lines.insert(0, f"{TENSOR_TABLE} = self._ks_tensors()")
        return self.lines
