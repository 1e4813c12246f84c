"""The "Add example inputs" scaffold: get_inputs/get_init_inputs functions for one module.

Names follow kernelstitch.core.problem's convention (plain names for `Model`, `_<Name>`
suffixes otherwise).  Values are placeholders that run: a tensor per forward argument and the
constructor's parameters (their defaults where they have one), each commented with its name so
the user knows what to replace.

A forward argument that `forward` hands straight to a layer built in `__init__`
(`self.fc = nn.Linear(64, 128)` ... `self.fc(x)`) gets the shape that layer takes:
`torch.randn(batch, 64)` for a Linear, `(batch, C, 32, 32)` for a Conv2d / BatchNorm2d of C
channels, `torch.randint(0, N, (batch, 32))` for an Embedding of N rows, and so on.  The layer's
arguments are read from literals, the constructor's parameters (with the values the scaffold
gives them, or the literal list an existing get_init_inputs returns), module-level integer
constants and simple arithmetic on those; anything else keeps the `(batch, 16)` placeholder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelstitch.core.problem import DEFAULT_CLASS

_PLACEHOLDER_BY_TYPE = {"int": "16", "float": "1.0", "bool": "False", "str": "''"}
_BATCH = 16
_SPATIAL = {1: (32,), 2: (32, 32), 3: (16, 16, 16)}
_SEQUENCE = 32


@dataclass(frozen=True)
class Scaffold:
    text: str  # the functions, no leading/trailing blank lines
    inputs_fn: str
    init_inputs_fn: str | None


@dataclass(frozen=True)
class _Param:
    name: str
    annotation: str | None
    default: str | None


def build_scaffold(source: str, class_name: str) -> Scaffold | None:
    """Scaffold for `class_name` in `source`; None when the source does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if class_name not in classes:
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                                 ast.AsyncFunctionDef))}
    torch_name = _torch_alias(tree) or "torch"
    forward = _method(classes, class_name, "forward")
    init = _method(classes, class_name, "__init__")
    suffix = "" if class_name == DEFAULT_CLASS else f"_{class_name}"
    inputs_fn, init_fn = f"get_inputs{suffix}", f"get_init_inputs{suffix}"

    init_params = _positional(init)
    needs_init = any(p.default is None for p in init_params) and init_fn not in functions
    init_values = [
        (p.default if p.default is not None else _placeholder(p, str(_BATCH)),
         p.name + (" (default)" if p.default is not None else ""))
        for p in init_params
    ]
    # What each name means when __init__ runs: module constants, then its parameters.
    known = _module_constants(tree)
    existing_init = functions.get(init_fn)
    given = _literal_return(existing_init) if existing_init is not None else None
    if existing_init is None or given is not None:
        for index, param in enumerate(init_params):
            if given is None:
                text = init_values[index][0]  # what the scaffold's get_init_inputs passes
            else:
                text = given[index] if index < len(given) else param.default
            value = None if text is None else _evaluate(_parse_expr(text), known)
            if value is not None:
                known[param.name] = value
            else:
                known.pop(param.name, None)
    else:
        for param in init_params:  # get_init_inputs computes them: their values are unknown
            known.pop(param.name, None)

    layers = _layers(classes, class_name, known)
    fed = _first_layers(forward, layers)
    forward_values = []
    for p in _positional(forward):
        if p.default is not None:
            continue
        layer = fed.get(p.name)
        if layer is not None:
            forward_values.append((layer.example(torch_name),
                                   f"{p.name}: what self.{layer.attr} ({layer.call}) takes"))
        elif p.annotation in _PLACEHOLDER_BY_TYPE:
            forward_values.append((_PLACEHOLDER_BY_TYPE[p.annotation], p.name))
        else:
            forward_values.append((f"{torch_name}.randn(batch, 16)",
                                   f"{p.name}: placeholder shape"))
    uses_batch = any("batch" in value for value, _ in forward_values)
    parts = [_function(inputs_fn, f"Example arguments of {class_name}.forward: "
                       "replace the placeholder shapes.", forward_values,
                       local_torch_import=_torch_alias(tree) is None and bool(forward_values),
                       batch=uses_batch)]
    if needs_init:
        parts.append(_function(init_fn, f"Example arguments of {class_name}(...): replace "
                               "the placeholder values.", init_values, local_torch_import=False))
    return Scaffold("\n\n\n".join(parts), inputs_fn, init_fn if needs_init else None)


# -- layer shapes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layer:
    attr: str  # self.<attr>
    call: str  # the constructor call, shortened, for the comment
    shape: tuple[int | str, ...] | None = None  # of a float input ("batch" for the batch)
    index_rows: int | None = None  # an Embedding's rows: its input is indices below that

    def example(self, torch_name: str) -> str:
        if self.index_rows is not None:
            return f"{torch_name}.randint(0, {self.index_rows}, (batch, {_SEQUENCE}))"
        return f"{torch_name}.randn({', '.join(str(d) for d in self.shape or ())})"


# layer class -> (the keyword of the argument that fixes the input, its position, input rank)
_FEATURE_LAYERS = {
    "Linear": ("in_features", 0, 0), "LazyLinear": None,
    "Conv1d": ("in_channels", 0, 1), "Conv2d": ("in_channels", 0, 2),
    "Conv3d": ("in_channels", 0, 3), "ConvTranspose1d": ("in_channels", 0, 1),
    "ConvTranspose2d": ("in_channels", 0, 2), "ConvTranspose3d": ("in_channels", 0, 3),
    "BatchNorm1d": ("num_features", 0, 0), "BatchNorm2d": ("num_features", 0, 2),
    "BatchNorm3d": ("num_features", 0, 3), "InstanceNorm1d": ("num_features", 0, 1),
    "InstanceNorm2d": ("num_features", 0, 2), "InstanceNorm3d": ("num_features", 0, 3),
    "GroupNorm": ("num_channels", 1, 2),
}
_RECURRENT = {"RNN", "LSTM", "GRU"}
# Calls that keep an argument's shape: `x = torch.relu(x)` before `self.fc(x)` still feeds x.
_SHAPE_KEEPING = {"relu", "gelu", "silu", "sigmoid", "tanh", "dropout", "contiguous", "float",
                  "half", "clone", "detach", "abs", "neg", "exp", "leaky_relu", "elu", "mish",
                  "hardtanh", "softplus", "to"}


def _layers(classes: dict[str, ast.ClassDef], class_name: str,
            known: dict[str, int]) -> dict[str, _Layer]:
    """The `self.<attr> = <layer>(...)` assignments of __init__ whose input shape is known."""
    init = _method(classes, class_name, "__init__")
    layers: dict[str, _Layer] = {}
    if init is None:
        return layers
    for node in ast.walk(init):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self" and isinstance(node.value, ast.Call)):
            continue
        call = node.value
        if _callee(call) == "Sequential" and call.args and isinstance(call.args[0], ast.Call):
            call = call.args[0]  # a Sequential takes what its first layer takes
        layer = _layer_of(target.attr, call, known)
        if layer is not None:
            layers[target.attr] = layer
    return layers


def _layer_of(attr: str, call: ast.Call, known: dict[str, int]) -> _Layer | None:
    kind = _callee(call)
    text = ast.unparse(call)
    shown = text if len(text) <= 60 else text[:57] + "..."

    def argument(keyword: str, position: int) -> int | None:
        for kw in call.keywords:
            if kw.arg == keyword:
                return _evaluate(kw.value, known)
        if position < len(call.args) and not any(
                isinstance(a, ast.Starred) for a in call.args[:position + 1]):
            return _evaluate(call.args[position], known)
        return None

    def flag(keyword: str) -> bool:
        return any(kw.arg == keyword and isinstance(kw.value, ast.Constant)
                   and kw.value.value is True for kw in call.keywords)

    spec = _FEATURE_LAYERS.get(kind or "")
    if spec is not None:
        keyword, position, rank = spec
        features = argument(keyword, position)
        if features is None or features <= 0:
            return None
        return _Layer(attr, shown, ("batch", features, *_SPATIAL.get(rank, ())))
    if kind == "LayerNorm":
        shape_node = next((kw.value for kw in call.keywords if kw.arg == "normalized_shape"),
                          call.args[0] if call.args else None)
        if isinstance(shape_node, (ast.Tuple, ast.List)):
            dims = [_evaluate(e, known) for e in shape_node.elts]
        else:
            dims = [_evaluate(shape_node, known)] if shape_node is not None else [None]
        if not dims or any(d is None or d <= 0 for d in dims):
            return None
        return _Layer(attr, shown, ("batch", *dims))
    if kind == "Embedding":
        rows = argument("num_embeddings", 0)
        return _Layer(attr, shown, index_rows=rows) if rows and rows > 0 else None
    if kind in _RECURRENT:
        size = argument("input_size", 0)
        if size is None or size <= 0:
            return None
        order = ("batch", _SEQUENCE) if flag("batch_first") else (_SEQUENCE, "batch")
        return _Layer(attr, shown, (*order, size))
    return None


def _first_layers(forward: ast.FunctionDef | None,
                  layers: dict[str, _Layer]) -> dict[str, _Layer]:
    """forward's parameters handed to a layer of `layers` before anything reshapes them."""
    if forward is None or not layers:
        return {}
    params = {p.name for p in _positional(forward)}
    fed: dict[str, _Layer] = {}
    # The names still holding a parameter's value (or a same-shaped function of it).
    holds = {name: name for name in params}
    for statement in forward.body:
        for call in sorted((n for n in ast.walk(statement) if isinstance(n, ast.Call)),
                           key=lambda n: (n.lineno, n.col_offset)):
            func = call.func
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "self" and func.attr in layers and call.args
                    and isinstance(call.args[0], ast.Name) and call.args[0].id in holds):
                fed.setdefault(holds[call.args[0].id], layers[func.attr])
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            kept = _shape_kept(statement.value, holds) if statement.value is not None else None
            if isinstance(statement, ast.AugAssign):
                kept = None
            for target in targets:
                for name in (n.id for n in ast.walk(target) if isinstance(n, ast.Name)):
                    holds.pop(name, None)
                    if kept is not None and isinstance(target, ast.Name):
                        holds[name] = kept
    return fed


def _shape_kept(value: ast.expr, holds: dict[str, str]) -> str | None:
    """The parameter `value` has the shape of, for a shape-keeping call or scaling of it."""
    if isinstance(value, ast.Name):
        return holds.get(value.id)
    if isinstance(value, ast.Call) and _callee(value) in _SHAPE_KEEPING:
        func = value.func
        if value.args and isinstance(value.args[0], ast.Name):
            return holds.get(value.args[0].id)  # torch.relu(x), F.gelu(x)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            return holds.get(func.value.id)  # x.float(), x.contiguous()
    if isinstance(value, ast.BinOp):
        sides = [value.left, value.right]
        names = [s for s in sides if isinstance(s, ast.Name)]
        if len(names) == 1 and any(isinstance(s, ast.Constant) for s in sides):
            return holds.get(names[0].id)  # x * 2.0
    return None


def _callee(call: ast.Call) -> str | None:
    """`nn.Linear(...)`, `torch.nn.Linear(...)`, `Linear(...)` -> "Linear"."""
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return None


def _module_constants(tree: ast.Module) -> dict[str, int]:
    """Module-level `NAME = <int expression>` assignments (KernelBench's `in_features = 64`)."""
    constants: dict[str, int] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            value = _evaluate(node.value, constants)
            if value is not None:
                constants[node.targets[0].id] = value
            else:
                constants.pop(node.targets[0].id, None)
    return constants


def _literal_return(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str] | None:
    """The element texts of a `return [a, b, ...]` that is fn's only return, else None."""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(returns) != 1 or not isinstance(returns[0].value, (ast.List, ast.Tuple)):
        return None
    return [ast.unparse(e) for e in returns[0].value.elts]


def _parse_expr(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _evaluate(node: ast.expr | None, known: dict[str, int]) -> int | None:
    """An integer expression of literals and known names (+ - * // and parentheses)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _evaluate(node.operand, known)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, known), _evaluate(node.right, known)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right != 0:
            return left // right
    return None


def _torch_alias(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch":
                    return alias.asname or "torch"
    return None


def _method(classes: dict[str, ast.ClassDef], name: str, method: str,
            seen: frozenset[str] = frozenset()) -> ast.FunctionDef | None:
    """`method` of class `name`, or inherited from a base class defined in the same file."""
    cls = classes.get(name)
    if cls is None or name in seen:
        return None
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == method:
            return node  # type: ignore[return-value]
    for base in cls.bases:
        if isinstance(base, ast.Name):
            found = _method(classes, base.id, method, seen | {name})
            if found is not None:
                return found
    return None


def _positional(fn: ast.FunctionDef | None) -> list[_Param]:
    """Parameters the convention passes positionally (self and *args/**kwargs left out)."""
    if fn is None:
        return []
    args = fn.args.posonlyargs + fn.args.args
    defaults: list[ast.expr | None] = [None] * (len(args) - len(fn.args.defaults))
    defaults += list(fn.args.defaults)
    params = [
        _Param(
            arg.arg,
            ast.unparse(arg.annotation) if arg.annotation is not None else None,
            ast.unparse(default) if default is not None else None,
        )
        for arg, default in zip(args, defaults)
    ]
    return params[1:] if params and params[0].name in ("self", "cls") else params


def _placeholder(param: _Param, fallback: str) -> str:
    return _PLACEHOLDER_BY_TYPE.get(param.annotation or "", fallback)


def _function(name: str, doc: str, values: list[tuple[str, str]],
              local_torch_import: bool, batch: bool = False) -> str:
    lines = [f"def {name}():", f'    """{doc}"""']
    if local_torch_import:
        lines.append("    import torch")
    if batch:
        lines.append(f"    batch = {_BATCH}")
    if not values:
        lines.append("    return []")
        return "\n".join(lines)
    lines.append("    return [")
    lines += [f"        {value},  # {comment}" for value, comment in values]
    lines.append("    ]")
    return "\n".join(lines)
