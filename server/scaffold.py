"""The "Add example inputs" scaffold: get_inputs/get_init_inputs functions for one module.

Names follow kernelstitch.core.problem's convention (plain names for `Model`, `_<Name>`
suffixes otherwise).  Values are placeholders that run: a tensor per forward argument and the
constructor's parameters (their defaults where they have one), each commented with its name so
the user knows what to replace.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelstitch.core.problem import DEFAULT_CLASS

_PLACEHOLDER_BY_TYPE = {"int": "16", "float": "1.0", "bool": "False", "str": "''"}
_TENSOR_PLACEHOLDER = "{torch}.randn(16, 16)"


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
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                              ast.AsyncFunctionDef))}
    torch_name = _torch_alias(tree)
    forward = _method(classes, class_name, "forward")
    init = _method(classes, class_name, "__init__")
    suffix = "" if class_name == DEFAULT_CLASS else f"_{class_name}"
    inputs_fn, init_fn = f"get_inputs{suffix}", f"get_init_inputs{suffix}"

    tensor = _TENSOR_PLACEHOLDER.format(torch=torch_name or "torch")
    forward_values = [
        (_placeholder(p, tensor) if p.default is None else p.default, p.name)
        for p in _positional(forward)
        if p.default is None
    ]
    parts = [_function(inputs_fn, f"Example arguments of {class_name}.forward: "
                       "replace the placeholder shapes.", forward_values,
                       local_torch_import=torch_name is None)]
    init_params = _positional(init)
    needs_init = any(p.default is None for p in init_params) and init_fn not in functions
    if needs_init:
        init_values = [
            (p.default if p.default is not None else _placeholder(p, "16"),
             p.name + (" (default)" if p.default is not None else ""))
            for p in init_params
        ]
        parts.append(_function(init_fn, f"Example arguments of {class_name}(...): replace "
                               "the placeholder values.", init_values, local_torch_import=False))
    return Scaffold("\n\n\n".join(parts), inputs_fn, init_fn if needs_init else None)


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
              local_torch_import: bool) -> str:
    lines = [f"def {name}():", f'    """{doc}"""']
    if local_torch_import:
        lines.append("    import torch")
    if not values:
        lines.append("    return []")
        return "\n".join(lines)
    lines.append("    return [")
    lines += [f"        {value},  # {comment}" for value, comment in values]
    lines.append("    ]")
    return "\n".join(lines)
