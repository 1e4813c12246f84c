"""Capture a module's forward as a `Graph`: build it and its inputs on the meta device (no memory,
no compute, whatever the sizes), `torch.export` it with every input dimension dynamic, and convert
the exported ATen graph into the torch-free IR.

This executes the user's code, so production callers go through the worker task
`kernelstitch.agents.planner.capture_task:capture_graph`; tests call `capture` directly.
"""

from __future__ import annotations

import operator
import re
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from kernelstitch.agents.plan.graph import (
    MAX_INLINE_CONSTANT_NUMEL,
    DTypeConst,
    Graph,
    Node,
    NodeRef,
    OpaqueConst,
    Placeholder,
    TensorMeta,
)
from kernelstitch.agents.planner.recurrent import RECURRENT_OPS, recurrent_layers_as_single_ops
from torch.export import Dim
from torch.export.graph_signature import InputKind, OutputKind
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

from kernelstitch.core.problem import LoadedProblem, ProblemError, load_problem

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


class GraphCaptureError(Exception):
    """The forward could not be captured; `line` is the user's line when known."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


class _UnreadableConstant(GraphCaptureError):
    """A tensor constant forward made whose contents this export did not keep."""


def capture(path: str | Path, module: str | None = None,
            constants: dict[str, Any] | None = None) -> Graph:
    """Graph of `module`'s forward in the problem file `path`.

    `constants` overrides module-level names (the UPPERCASE shape constants) before the module
    and its inputs are built: tests capture shrunk problems this way.
    """
    path = Path(path).resolve()
    try:
        problem = load_problem(path, module)
    except ProblemError as exc:
        raise GraphCaptureError(str(exc)) from exc
    for name, value in (constants or {}).items():
        setattr(problem.namespace, name, value)
    try:
        model = _build_module(problem)
        inputs = _meta_inputs(problem)
    except ProblemError as exc:
        raise GraphCaptureError(str(exc), _user_line(exc, path)) from exc
    if not isinstance(model, torch.nn.Module):
        raise GraphCaptureError(f"{problem.info.name}(...) did not return an nn.Module")

    with recurrent_layers_as_single_ops():
        exported, dynamic, notes = _export(model, inputs, path, problem.info.name, problem)
    try:
        return _convert(exported, path, problem.info.name, dynamic, notes)
    except _UnreadableConstant:
        pass
    # forward builds a tensor from Python data, which the meta device leaves without contents:
    # export again with the recorder, which keeps a CPU copy of each.  Only then: under any
    # torch-function mode, export decomposes composite ops such as aten.gru into their loop
    # over time steps (level3/39_GRU: minutes of tracing instead of one op).
    recorder = _ConstantRecorder()
    inputs = _meta_inputs(problem)  # fresh: export leaves symbolic sizes on the ones it traced
    with recorder, recurrent_layers_as_single_ops():
        exported, dynamic, notes = _export(model, inputs, path, problem.info.name, problem)
    return _convert(exported, path, problem.info.name, dynamic, notes, recorder)


def _meta_inputs(problem: LoadedProblem) -> list[Any]:
    """The problem's example inputs on the meta device (sizes only)."""
    with torch.device("meta"):
        return problem.inputs()


def _build_module(problem: LoadedProblem) -> Any:
    """The module on the meta device (no memory, no initialisation work).  A constructor that
    reads tensor values (`[x.item() for x in torch.linspace(0, rate, depth)]`, Swin's drop-path
    rates) cannot run there: it is built on the CPU and its storage then dropped (`.to("meta")`),
    which keeps every parameter's shape and dtype."""
    try:
        with torch.device("meta"):
            return problem.build()
    except ProblemError as exc:
        if "meta tensors" not in str(exc):
            raise
    model = problem.build()
    return model.to("meta") if isinstance(model, torch.nn.Module) else model


# Factories building a tensor from Python data: in forward, torch.export lifts their result as
# a tensor constant (CONSTANT_TENSOR input).
_DATA_FACTORIES = frozenset({torch.tensor, torch.as_tensor, torch.asarray, torch.scalar_tensor})


class _ConstantRecorder(TorchFunctionMode):
    """Keeps the value of every tensor forward builds from Python data on the meta device
    (`torch.tensor(v, device=x.device)` with x on meta has no contents): the same call on the
    CPU, keyed by the meta tensor's identity (torch.export lifts that very object)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[torch.Tensor, torch.Tensor]] = []  # (result, CPU copy)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (func in _DATA_FACTORIES and isinstance(out, torch.Tensor) and out.is_meta
                and out.numel() <= MAX_INLINE_CONSTANT_NUMEL):
            try:  # outside export's fake / tracing modes: a real CPU tensor
                with _disable_current_modes(), torch.device("cpu"):
                    cpu = func(*args, **{**kwargs, "device": "cpu"})
            except Exception:  # noqa: BLE001 - data that is itself a tensor: no value
                cpu = None
            if type(cpu) is torch.Tensor and not cpu.is_meta:
                self.made.append((out, cpu))
        return out

    def value_of(self, tensor: Any) -> torch.Tensor | None:
        if type(tensor) is torch.Tensor and not tensor.is_meta:
            return tensor
        return next((cpu for made, cpu in self.made if made is tensor), None)


def _export(model: torch.nn.Module, inputs: list[Any], path: Path, name: str, problem: LoadedProblem):
    """`_export_sized` with torch.einsum tracing as one `aten.einsum` node: where opt_einsum is
    installed (the GPU machine's image has it), torch.einsum asks it for a contraction order
    with the traced sizes, which made export fix sizes it was asked to keep dynamic (level3/48's
    output reshape kept d_head = 64, and the Verifier's d_head = 67 case rejected the program).
    The order is only a speed choice for PyTorch: the planner decides the contraction itself."""
    with torch.backends.opt_einsum.flags(enabled=False):
        return _export_sized(model, inputs, path, name, problem)


def _export_sized(model: torch.nn.Module, inputs: list[Any], path: Path, name: str, problem: LoadedProblem):
    """Export with dynamic sizes (one candidate for every shape); static sizes as a fallback, on
    fresh inputs: a failed dynamic export leaves its symbolic sizes attached to the tensors it
    traced (level3/19's static export then failed on the same sympy inequality)."""
    dynamic_shapes = tuple(
        {d: Dim.AUTO for d in range(x.dim())} if isinstance(x, torch.Tensor) else None
        for x in inputs
    )
    try:
        exported = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes, strict=False)
        return exported, True, _specialised_note(exported)
    except Exception as dynamic_exc:  # noqa: BLE001 - any export failure: retry batch-only, then static
        first = dynamic_exc
    # Only the leading (batch) dims dynamic: a flatten into a Linear of fixed in-features, or a
    # pooling that must end at 1x1 (level3/19's `x.view(x.size(0), -1)`), pins the spatial sizes
    # but not the batch, which users do change.
    inputs = _meta_inputs(problem)
    batch_only = tuple({0: Dim.AUTO} if isinstance(x, torch.Tensor) and x.dim() > 0 else None for x in inputs)
    try:
        exported = torch.export.export(model, tuple(inputs), dynamic_shapes=batch_only, strict=False)
        return exported, False, [
            f"only the batch dims are dynamic: dynamic export of every size failed ({type(first).__name__}: "
            f"{_first_lines(str(first), 1)}); the candidate accepts other batch sizes, the other sizes as captured"]
    except Exception:  # noqa: BLE001 - retry static, reporting the first failure
        pass
    inputs = _meta_inputs(problem)
    try:
        exported = torch.export.export(model, tuple(inputs), strict=False)
    except Exception as exc:
        line = _user_line(exc, path)
        where = f"{path.name}:{line}: " if line else ""
        advice = _advice(exc)
        if advice:  # a known limit: the cause and what to change, not torch's page of text
            raise GraphCaptureError(f"{where}{name}.forward {advice}", line) from exc
        raise GraphCaptureError(
            f"{where}torch.export could not trace {name}.forward: {type(exc).__name__}: "
            f"{_first_lines(str(exc))}", line,
        ) from exc
    note = (f"sizes are static: dynamic export failed ({type(first).__name__}: "
            f"{_first_lines(str(first), 1)}); the candidate may only accept the captured shapes")
    return exported, False, [note]


def _specialised_note(exported) -> list[str]:
    """A note when export fixed an input's leading (batch) size although asked to keep it
    dynamic: the code pins it (Swin's window reshapes), so the candidate accepts only that batch
    size and the Verifier's other-shape cases will say so.  Other fixed sizes are the norm (a
    weight pins the features) and a size of 1 is fixed by design: neither is noted."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    users = set(exported.graph_signature.user_inputs)
    fixed = []
    for node in exported.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" and node.name in users else None
        shape = getattr(val, "shape", None)
        if shape and is_concrete_int(shape[0]) and int(shape[0]) > 1:
            fixed.append(f"{node.name} to {int(shape[0])}")
    if not fixed:
        return []
    return [f"export fixed the batch size ({', '.join(fixed)}): the code pins it, so the candidate "
            "accepts only that batch size"]


# torch.export limits a user meets in ordinary modules: (exception name, text in the message) ->
# one sentence of cause and what to change (README, "What the built-in compiler does").
_DATA_DEPENDENT = ("branches or loops on tensor values (data-dependent control flow), which a captured "
                   "graph cannot hold: compute both sides and pick with torch.where, or move the decision "
                   "out of forward.")
_ADVICE = (
    (("GuardOnDataDependentSymNode",), ("",), _DATA_DEPENDENT),
    (("UserError", "Unsupported", "RuntimeError"), ("data-dependent", "data dependent"), _DATA_DEPENDENT),
    (("Unsupported",), ("item()", ".item", "tolist"),
     "reads a tensor's value into Python (.item(), .tolist()), which a captured graph cannot hold: "
     "keep the value a tensor (x.sum() rather than x.sum().item())."),
)


def _advice(exc: BaseException) -> str | None:
    kind, text = type(exc).__name__, str(exc)
    for names, needles, advice in _ADVICE:
        if any(n in kind for n in names) and any(s in text for s in needles):
            return advice
    return None


def _first_lines(text: str, count: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:count])


def _user_line(exc: BaseException, path: Path) -> int | None:
    """Innermost line of the problem file in the exception's traceback or message."""
    line = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            if _same_file(frame.filename, path):
                line = frame.lineno
        for file, number in _FRAME.findall(str(current)):
            if _same_file(file, path):
                line = int(number)
        current = current.__cause__ or current.__context__
    return line


def _same_file(filename: str, path: Path) -> bool:
    try:
        return Path(filename).resolve() == path
    except (OSError, ValueError):
        return False


def _line_of(stack_trace: str | None, path: Path) -> int | None:
    """The innermost frame in the user's file: for an op inside a submodule's forward (F.linear
    in nn.Linear) that is the user's line calling the submodule."""
    line = None
    for file, number in _FRAME.findall(stack_trace or ""):
        if _same_file(file, path):
            line = int(number)
    return line


# ---- conversion ------------------------------------------------------------------------------

def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _size(d: Any) -> tuple[int | str, int]:
    """(IR size, example size) of one dimension."""
    if isinstance(d, int):
        return d, d
    expr = d.node.expr
    if getattr(expr, "is_number", False):
        return int(expr), int(expr)
    hint = d.node.hint
    if hint is None:
        hint = d.node.shape_env.size_hint(expr)
    return str(expr), int(hint)


def _meta(value: Any) -> TensorMeta | None:
    if not isinstance(value, torch.Tensor):
        return None
    sizes = [_size(d) for d in value.shape]
    return TensorMeta(tuple(s for s, _ in sizes), tuple(h for _, h in sizes), _dtype_name(value.dtype))


def _op_name(target: Any) -> str:
    if isinstance(target, torch._ops.OpOverload):
        name = str(target)  # aten.linear.default
        return RECURRENT_OPS.get(name, name)
    if target is operator.getitem:
        return "getitem"
    module = getattr(target, "__module__", "") or ""
    module = {"_operator": "operator"}.get(module, module)
    return f"{module}.{getattr(target, '__name__', repr(target))}"


def _value(arg: Any, alias: dict[str, str] | None = None) -> Any:
    if isinstance(arg, torch.fx.Node):
        return NodeRef((alias or {}).get(arg.name, arg.name))
    if isinstance(arg, (list, tuple)):
        return [_value(a, alias) for a in arg]
    if isinstance(arg, torch.dtype):
        return DTypeConst(_dtype_name(arg))
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return arg
    if isinstance(arg, (torch.SymInt, torch.SymFloat)):
        return OpaqueConst(str(arg))
    return OpaqueConst(str(arg))


def _module_scope(meta: dict[str, Any]) -> tuple[str, str]:
    stack = meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, kind = list(stack.values())[-1]
    if str(path).startswith("_empty"):  # export's placeholder for nodes it adds itself
        return "", ""
    kind_name = kind if isinstance(kind, str) else f"{kind.__module__}.{kind.__qualname__}"
    return str(path), kind_name


def _placeholders(exported) -> dict[str, Placeholder]:
    found: dict[str, Placeholder] = {}
    user_index = 0
    for spec in exported.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.PARAMETER:
            found[name] = Placeholder("parameter", spec.target)
        elif spec.kind == InputKind.BUFFER:
            found[name] = Placeholder("buffer", spec.target, persistent=bool(spec.persistent))
        elif spec.kind == InputKind.USER_INPUT:
            found[name] = Placeholder("input", index=user_index)
            user_index += 1
        else:
            found[name] = Placeholder("constant", spec.target)
    return found


# Ops that hand back their (constant) argument unchanged: export wraps a lifted constant in
# lift_fresh_copy and detach_; capture reads the constant itself instead.
_CONSTANT_PASSTHROUGH = frozenset({"aten.lift_fresh_copy.default", "aten.detach_.default",
                                   "aten.detach.default", "aten.alias.default"})


def _constant_value(exported, ph: Placeholder, recorder: _ConstantRecorder | None,
                    line: int | None) -> Any:
    """The contents of a lifted tensor constant as a JSON-able number / nested lists."""
    what = f"forward creates the tensor constant {ph.target!r}"
    tensor = exported.constants.get(ph.target) if ph.target else None
    value = recorder.value_of(tensor) if recorder is not None else tensor
    if not isinstance(value, torch.Tensor) or value.is_meta:
        raise _UnreadableConstant(
            f"{what} from data capture cannot read (only torch.tensor(...) of Python numbers "
            "is supported): make it a buffer with register_buffer", line)
    if value.numel() > MAX_INLINE_CONSTANT_NUMEL:
        raise GraphCaptureError(
            f"{what} of {value.numel()} elements: constants of more than "
            f"{MAX_INLINE_CONSTANT_NUMEL} elements are not inlined into the plan; make it a "
            "buffer with register_buffer in __init__", line)
    if value.is_complex() or value.dtype.is_floating_point is False and value.dtype not in (
            torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        raise GraphCaptureError(f"{what} of dtype {_dtype_name(value.dtype)}: only real "
                                "floating-point, integer and bool constants are supported", line)
    return value.detach().cpu().tolist()


_COPY_OPS = frozenset({"aten.copy_.default", "aten.copy.default"})


def _overwritten_constants(exported, placeholders: dict[str, Placeholder],
                           users: dict[str, list]) -> dict[str, str]:
    """Tensor constants whose every element forward overwrites before reading it
    (`self.hidden.copy_(h0)` on a tensor attribute set in __init__, level3/33_VanillaRNN): their
    contents never matter.  Maps each such constant and its copy_ to the copied source; exact
    only where the source has the constant's sizes and dtype (no broadcast, no cast)."""
    found: dict[str, str] = {}
    for fx_node in exported.graph.nodes:
        if fx_node.op != "placeholder" or placeholders[fx_node.name].kind != "constant":
            continue
        readers = users[fx_node.name]
        if len(readers) != 1 or _op_name(readers[0].target) not in _COPY_OPS:
            continue
        copy = readers[0]
        source = copy.args[1] if len(copy.args) > 1 else None
        if copy.args[0] is not fx_node or not isinstance(source, torch.fx.Node) or copy.kwargs:
            continue
        dst, src = fx_node.meta.get("val"), source.meta.get("val")
        if (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.dtype == src.dtype
                and [_size(d) for d in dst.shape] == [_size(d) for d in src.shape]):
            found[fx_node.name] = found[copy.name] = source.name
    return found


def _convert(exported, path: Path, module: str, dynamic: bool, notes: list[str],
             recorder: _ConstantRecorder | None = None) -> Graph:
    placeholders = _placeholders(exported)
    nodes: list[Node] = []
    constants: set[str] = set()
    alias: dict[str, str] = {}  # pass-through node of a constant -> the constant
    users = {n.name: list(n.users) for n in exported.graph.nodes}
    overwritten = _overwritten_constants(exported, placeholders, users)
    for fx_node in exported.graph.nodes:
        meta = fx_node.meta
        if fx_node.name in overwritten:  # the constant, or its copy_: forward reads the source
            alias[fx_node.name] = overwritten[fx_node.name]
            continue
        if fx_node.op == "placeholder":
            ph = placeholders[fx_node.name]
            if ph.kind == "constant":
                first_use = next(iter(users[fx_node.name]), None)
                line = _line_of(first_use.meta.get("stack_trace"), path) if first_use else None
                ph = replace(ph, value=_constant_value(exported, ph, recorder, line))
                constants.add(fx_node.name)
            nodes.append(Node(fx_node.name, "placeholder", outputs=(_meta(meta.get("val")),),
                              placeholder=ph))
            continue
        if fx_node.op != "call_function":
            continue  # output handled below
        if (_op_name(fx_node.target) in _CONSTANT_PASSTHROUGH and fx_node.args
                and isinstance(fx_node.args[0], torch.fx.Node)
                and alias.get(fx_node.args[0].name, fx_node.args[0].name) in constants):
            alias[fx_node.name] = alias.get(fx_node.args[0].name, fx_node.args[0].name)
            continue
        val = meta.get("val")
        multi = isinstance(val, (list, tuple))
        outputs = tuple(_meta(v) for v in val) if multi else (_meta(val),)
        symbol = str(val) if isinstance(val, (torch.SymInt, torch.SymFloat, int)) and not multi else None
        module_path, module_type = _module_scope(meta)
        nodes.append(Node(
            name=fx_node.name,
            op=_op_name(fx_node.target),
            args=tuple(_value(a, alias) for a in fx_node.args),
            kwargs={k: _value(v, alias) for k, v in fx_node.kwargs.items()},
            outputs=outputs,
            multi_output=multi,
            symbol=symbol,
            line=_line_of(meta.get("stack_trace"), path),
            module_path=module_path,
            module_type=module_type,
        ))

    output_node = next(n for n in exported.graph.nodes if n.op == "output")
    results = list(output_node.args[0])
    outputs = []
    for spec, value in zip(exported.graph_signature.output_specs, results):
        if spec.kind == OutputKind.USER_OUTPUT:
            outputs.append(_value(value, alias))
        else:
            what = spec.target or spec.arg.name
            raise GraphCaptureError(
                f"forward mutates {what!r} ({spec.kind.name.lower()}): in-place updates of "
                "buffers or inputs (e.g. BatchNorm running stats in training mode) are not "
                "supported; call .eval() in the problem or avoid the mutation")
    out_spec = exported.call_spec.out_spec
    output_is_tuple = out_spec is not None and not out_spec.is_leaf()
    if output_is_tuple and any(not child.is_leaf() for child in out_spec.children()):
        raise GraphCaptureError("forward returns a nested structure: return a tensor or a tuple "
                                "of tensors")
    return Graph(module=module, source_path=str(path), nodes=nodes, outputs=outputs,
                 output_is_tuple=output_is_tuple, dynamic=dynamic, notes=notes)
