"""What a name in candidate source denotes, seen through indirection (pure `ast`, nothing runs).

A candidate rewarded for passing can reach `torch.relu` without writing it: `getattr(torch,
"re" + "lu")`, an f-string or `"".join` of constants, a module-level constant name,
`torch.ops.aten.relu.default`, `r = torch.relu`, `from torch.nn.functional import hardtanh as
h`, `ops = torch.ops.aten`, `torch.__dict__["relu"]`, `importlib.import_module(...)`,
`functools.partial`, a list or dict of functions.  `Resolver.denote` returns the qualified names
an expression may stand for (an over-approximation: every binding of a name counts), and
records the lookups on torch namespaces whose attribute name cannot be computed statically.

Qualified names: imports as written (`torch.nn.functional.relu`), `torch._ops.ops` folded into
`torch.ops`, builtins as `builtins.<name>`, the file's own definitions as `<def>NAME`,
`<class>NAME`, `<method>NAME` (ModelNew's), `<lambda>ID`, and an instance as its class's name
plus `()` (`torch.nn.ReLU()`).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Any

MAX_FOLDED_CHARS = 256  # op names are short; bounds "a" * 10**9 and the like
MAX_DEPTH = 24  # nested bindings followed before giving up (cycles are cut separately)
BUILTIN_NAMES = frozenset(dir(builtins))
# str methods that are pure functions of constant arguments (folded by calling them).
SAFE_STR_METHODS = frozenset({
    "join", "format", "lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix",
    "removesuffix", "capitalize", "casefold", "title", "swapcase", "split", "rsplit",
})
# Calls that return (a wrapper of) their first argument, so they denote what it denotes.
PASS_THROUGH = frozenset({"functools.partial", "builtins.staticmethod", "builtins.classmethod",
                          "functools.lru_cache", "functools.cache", "functools.wraps"})
# nn containers: calling one runs the modules given to it.
MODULE_CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})
# Methods that put their arguments into a container bound to a name (`OPS.append(torch.relu)`).
CONTAINER_WRITES = frozenset({"append", "extend", "insert", "update", "setdefault", "add"})
# Stands for a value no static reading knows (`name += k`, an argument): folds to nothing.
_OPAQUE = ast.Constant(value=None)
DEF_PREFIXES = ("<def>", "<class>", "<method>", "<lambda>")


@dataclass(frozen=True)
class DynamicLookup:
    """An attribute of a torch namespace looked up by a name no static reading can compute."""

    namespace: str  # torch.nn.functional, torch.ops.aten, ...
    line: int
    text: str  # the source of the lookup, shortened


@dataclass
class Scope:
    bindings: dict[str, list[ast.expr]]  # name -> every value assigned to it in this scope
    params: frozenset[str] = frozenset()  # bound by the caller: unknown values
    parent: Scope | None = None


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name for every import in the file (any nesting level)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = _normal(alias.name)
                else:
                    root = alias.name.split(".")[0]
                    aliases[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = _normal(f"{node.module}.{alias.name}")
    return aliases


def is_torch_name(qualname: str) -> bool:
    return qualname == "torch" or qualname.startswith("torch.")


def _normal(qualname: str) -> str:
    """`torch._ops.ops.aten` -> `torch.ops.aten` (one spelling per namespace)."""
    if qualname.startswith("torch._ops.ops"):
        return "torch.ops" + qualname[len("torch._ops.ops"):]
    return qualname


def _bindings(statements: list[ast.stmt]) -> dict[str, list[ast.expr]]:
    """Simple-name assignments in a block and its nested blocks (not in nested defs/classes)."""
    found: dict[str, list[ast.expr]] = {}

    def add(target: ast.AST, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            found.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(
                value.elts) == len(target.elts) else None
            for i, element in enumerate(target.elts):
                # `a, b = torch.relu, x`: pairwise; an opaque right side binds each to all of it
                add(element, elements[i] if elements else value)

    stack = list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                add(target, node.value)
                if isinstance(target, ast.Subscript):
                    _add_item_store(target, node.value, add)
        elif isinstance(node, ast.AugAssign):
            add(node.target, _OPAQUE)  # `name += part`: no longer one constant
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                isinstance(node.func.value, ast.Name) and node.func.attr in CONTAINER_WRITES):
            for arg in list(node.args) + [k.value for k in node.keywords]:
                add(node.func.value, arg)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            add(node.target, node.value)
        elif isinstance(node, ast.NamedExpr):
            add(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            add(node.target, node.iter)  # `for f in (torch.relu,)`: f is one of the elements
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    add(item.optional_vars, item.context_expr)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _add_item_store(target: ast.Subscript, value: ast.expr, add) -> None:
    """`OPS["f"] = torch.relu`: OPS may now hold it; `globals()["r"] = torch.relu` binds r."""
    owner = target.value
    if isinstance(owner, ast.Name):
        add(owner, value)
    elif (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
          and owner.func.id in ("globals", "locals") and isinstance(target.slice, ast.Constant)
          and isinstance(target.slice.value, str)):
        add(ast.Name(id=target.slice.value, ctx=ast.Store()), value)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> frozenset[str]:
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return frozenset(names)


@dataclass
class Resolver:
    """Name resolution over one candidate module (ModelNew's `self.X` included)."""

    tree: ast.Module
    class_name: str = "ModelNew"
    imports: dict[str, str] = field(init=False)
    module_scope: Scope = field(init=False)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(init=False)
    classes: dict[str, ast.ClassDef] = field(init=False)
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(init=False)
    self_attrs: dict[str, list[tuple[ast.expr, Scope]]] = field(init=False)
    lambdas: dict[str, tuple[ast.Lambda, Scope]] = field(init=False)
    dynamic: dict[tuple[int, int], DynamicLookup] = field(init=False)

    def __post_init__(self) -> None:
        self.imports = import_aliases(self.tree)
        self.module_scope = Scope(_bindings(self.tree.body))
        defs = (ast.FunctionDef, ast.AsyncFunctionDef)
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, defs)}
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        # ModelNew's body after those of its same-file bases: `self.helper` may be inherited
        body = [n for c in reversed(self._class_chain()) for n in c.body]
        self.methods = {n.name: n for n in body if isinstance(n, defs)}
        self.lambdas = {}
        self.dynamic = {}
        # self.X: class-body assignments and `self.X = ...` in any method
        class_scope = Scope(_bindings([n for n in body if not isinstance(n, defs)]),
                            parent=self.module_scope)
        self.self_attrs = {name: [(v, class_scope) for v in values]
                           for name, values in class_scope.bindings.items()}
        for method in self.methods.values():
            scope = self.scope_of(method)
            for node in ast.walk(method):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
                for target in targets:
                    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                            and target.value.id == "self"):
                        self.self_attrs.setdefault(target.attr, []).append((node.value, scope))
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "setattr" and len(node.args) == 3
                        and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
                    name = self.fold(node.args[1], scope)  # setattr(self, "act", torch.relu)
                    if isinstance(name, str):
                        self.self_attrs.setdefault(name, []).append((node.args[2], scope))

    def _class_chain(self) -> list[ast.ClassDef]:
        """ModelNew, then its bases defined in this file (depth first, each once)."""
        chain: list[ast.ClassDef] = []
        stack = [self.class_name]
        while stack:
            cls = self.classes.get(stack.pop(0))
            if cls is None or cls in chain:
                continue
            chain.append(cls)
            stack += [b.id for b in cls.bases if isinstance(b, ast.Name)]
        return chain

    # ---- scopes ----------------------------------------------------------------------------
    def scope_of(self, fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
                 parent: Scope | None = None) -> Scope:
        body = [fn.body] if isinstance(fn, ast.Lambda) else fn.body
        statements = [ast.Expr(b) if isinstance(b, ast.expr) else b for b in body]
        return Scope(_bindings(statements), _params(fn), parent or self.module_scope)

    def lambda_name(self, node: ast.Lambda, scope: Scope) -> str:
        name = f"<lambda>{node.lineno}:{node.col_offset}"
        self.lambdas.setdefault(name, (node, self.scope_of(node, scope)))
        return name

    # ---- constant folding ------------------------------------------------------------------
    def fold(self, expr: ast.AST, scope: Scope, depth: int = 0) -> Any:
        """The constant value of an expression built from constants, else None."""
        if depth > MAX_DEPTH:
            return None
        value = self._fold(expr, scope, depth + 1)
        if isinstance(value, str) and len(value) > MAX_FOLDED_CHARS:
            return None
        if isinstance(value, (list, tuple)) and len(value) > MAX_FOLDED_CHARS:
            return None
        return value

    def _fold(self, expr: ast.AST, scope: Scope, depth: int) -> Any:
        fold = self.fold
        if isinstance(expr, ast.Constant):
            return expr.value if isinstance(expr.value, (str, int, float, bool)) else None
        if isinstance(expr, ast.Name):
            values = self._values_of(expr.id, scope)
            if values is None or not values:
                return None
            folded = [fold(v, s, depth) for v, s in values]
            # one name, several different constants: not a static name
            return folded[0] if all(f is not None and f == folded[0] for f in folded) else None
        if isinstance(expr, (ast.Tuple, ast.List)):
            items = [fold(e, scope, depth) for e in expr.elts]
            if any(i is None for i in items):
                return None
            return tuple(items) if isinstance(expr, ast.Tuple) else list(items)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
            operand = fold(expr.operand, scope, depth)
            if isinstance(operand, (int, float)) and not isinstance(operand, bool):
                return -operand if isinstance(expr.op, ast.USub) else operand
            return None
        if isinstance(expr, ast.BinOp):
            return _binop(expr.op, fold(expr.left, scope, depth), fold(expr.right, scope, depth))
        if isinstance(expr, ast.JoinedStr):
            parts = []
            for value in expr.values:
                if isinstance(value, ast.Constant):
                    parts.append(str(value.value))
                    continue
                if not isinstance(value, ast.FormattedValue):
                    return None
                inner = fold(value.value, scope, depth)
                spec = fold(value.format_spec, scope, depth) if value.format_spec else ""
                if inner is None or spec is None:
                    return None
                inner = {115: str, 114: repr, 97: ascii}.get(value.conversion, lambda v: v)(inner)
                try:
                    parts.append(format(inner, spec))
                except (ValueError, TypeError):
                    return None
            return "".join(parts)
        if isinstance(expr, ast.Subscript):
            base = fold(expr.value, scope, depth)
            index = self._fold_index(expr.slice, scope, depth)
            if isinstance(base, (str, list, tuple)) and index is not None:
                try:
                    return base[index]
                except (IndexError, TypeError, ValueError):
                    return None
            return None
        if isinstance(expr, ast.Call):
            return self._fold_call(expr, scope, depth)
        return None

    def _fold_index(self, node: ast.AST, scope: Scope, depth: int) -> Any:
        if isinstance(node, ast.Slice):
            parts = [self.fold(p, scope, depth) if p is not None else None
                     for p in (node.lower, node.upper, node.step)]
            given = [p for p, n in zip(parts, (node.lower, node.upper, node.step)) if n]
            if any(p is None or not isinstance(p, int) for p in given):
                return None
            return slice(*parts)
        index = self.fold(node, scope, depth)
        return index if isinstance(index, int) and not isinstance(index, bool) else None

    def _fold_call(self, call: ast.Call, scope: Scope, depth: int) -> Any:
        if call.keywords and not all(k.arg for k in call.keywords):
            return None
        args = [self.fold(a, scope, depth) for a in call.args]
        kwargs = {k.arg: self.fold(k.value, scope, depth) for k in call.keywords}
        if any(a is None for a in args) or any(v is None for v in kwargs.values()):
            return None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in SAFE_STR_METHODS:
            receiver = self.fold(func.value, scope, depth)
            if isinstance(receiver, str):
                if func.attr == "format" and any(isinstance(a, (list, tuple)) for a in args):
                    return None  # "{0.__class__}" and the like: constants only
                try:
                    result = getattr(receiver, func.attr)(*args, **kwargs)
                except (TypeError, ValueError, IndexError, KeyError, AttributeError):
                    return None
                return result if isinstance(result, (str, list)) else None
        names = self.denote(func, scope, depth)
        if names == {"builtins.str"} and len(args) == 1 and not kwargs:
            return str(args[0])
        if names == {"builtins.chr"} and len(args) == 1 and isinstance(args[0], int):
            return chr(args[0]) if 0 <= args[0] < 0x110000 else None
        if names == {"builtins.reversed"} and len(args) == 1 and isinstance(args[0], str):
            return list(reversed(args[0]))
        return None

    # ---- denotation ------------------------------------------------------------------------
    def _values_of(self, name: str, scope: Scope) -> list[tuple[ast.expr, Scope]] | None:
        """The values bound to `name` in the innermost scope binding it: [] for a parameter
        (the caller's value), None for a name this file never binds."""
        current: Scope | None = scope
        while current is not None:
            if name in current.params:
                return []
            if name in current.bindings:
                return [(v, current) for v in current.bindings[name]]
            current = current.parent
        return None

    def denote(self, expr: ast.AST, scope: Scope, depth: int = 0,
               seen: frozenset[int] = frozenset()) -> set[str]:
        """Every qualified name `expr` may stand for (empty: a plain value, e.g. a tensor)."""
        if depth > MAX_DEPTH or id(expr) in seen:
            return set()
        seen = seen | {id(expr)}
        d = depth + 1
        if isinstance(expr, ast.Name):
            return self._denote_name(expr.id, scope, d, seen)
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id == "self":
                return self._denote_self_attr(expr.attr, d, seen)
            bases = self.denote(expr.value, scope, d, seen)
            if expr.attr == "__class__" and not bases:
                return {"torch.Tensor"}  # a value's class: in a forward, a tensor's
            return {_normal(f"{base}.{expr.attr}") for base in bases}
        if isinstance(expr, ast.Call):
            return self._denote_call(expr, scope, d, seen)
        if isinstance(expr, ast.Subscript):
            return self._denote_subscript(expr, scope, d, seen)
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*[self.denote(e, scope, d, seen) for e in expr.elts])
        if isinstance(expr, ast.Dict):
            return set().union(*[self.denote(v, scope, d, seen) for v in expr.values])
        if isinstance(expr, ast.IfExp):
            return self.denote(expr.body, scope, d, seen) | self.denote(expr.orelse, scope, d,
                                                                        seen)
        if isinstance(expr, ast.BoolOp):
            return set().union(*[self.denote(v, scope, d, seen) for v in expr.values])
        if isinstance(expr, ast.NamedExpr):
            return self.denote(expr.value, scope, d, seen)
        if isinstance(expr, ast.Starred):
            return self.denote(expr.value, scope, d, seen)
        if isinstance(expr, ast.Lambda):
            return {self.lambda_name(expr, scope)}
        return set()

    def _denote_name(self, name: str, scope: Scope, depth: int, seen: frozenset[int]) -> set[str]:
        values = self._values_of(name, scope)
        found: set[str] = set()
        for value, where in values or []:
            found |= self.denote(value, where, depth, seen)
        if values is None and name in self.imports:
            found.add(self.imports[name])
        if values is None and name in self.functions:
            found.add(f"<def>{name}")
        if values is None and name in self.classes:
            found.add(f"<class>{name}")
        if values is None and not found and name in BUILTIN_NAMES:
            found.add(f"builtins.{name}")
        return found

    def _denote_self_attr(self, attr: str, depth: int, seen: frozenset[int]) -> set[str]:
        found: set[str] = set()
        for value, scope in self.self_attrs.get(attr, []):
            found |= self.denote(value, scope, depth, seen)
        if attr in self.methods:
            found.add(f"<method>{attr}")
        return found

    def _denote_call(self, call: ast.Call, scope: Scope, depth: int,
                     seen: frozenset[int]) -> set[str]:
        found: set[str] = set()
        args = call.args
        for func in self.denote(call.func, scope, depth, seen):
            if func in ("builtins.getattr", "operator.attrgetter") or func.endswith(
                    (".__getattr__", ".__getattribute__")):
                if func == "builtins.getattr" and len(args) >= 2:
                    found |= self._lookup(self.denote(args[0], scope, depth, seen), args[1],
                                          scope, depth, call)
                elif func == "operator.attrgetter" and args:
                    name = self.fold(args[0], scope, depth)
                    found.add(f"<attrgetter>{name}" if isinstance(name, str) else "<attrgetter>")
                elif func.endswith((".__getattr__", ".__getattribute__")) and args:
                    owner = func.rsplit(".", 1)[0]
                    found |= self._lookup({owner}, args[0], scope, depth, call)
            elif func.startswith("<attrgetter>") and args:
                name = func[len("<attrgetter>"):]
                owners = self.denote(args[0], scope, depth, seen)
                if name:
                    found |= {_normal(f"{o}.{name}") for o in owners}
                else:
                    self._note_dynamic(owners, call)
            elif func in ("importlib.import_module", "builtins.__import__") and args:
                name = self.fold(args[0], scope, depth)
                if isinstance(name, str):
                    whole = func == "importlib.import_module" or len(args) > 3 or any(
                        k.arg == "fromlist" for k in call.keywords)
                    found.add(_normal(name if whole else name.split(".")[0]))
                else:
                    self._note_dynamic({"torch"}, call)  # any module, torch included
            elif func == "builtins.type" and len(args) == 1 and not self.denote(
                    args[0], scope, depth, seen):
                found.add("torch.Tensor")  # type(y).relu(y): as for y.__class__
            elif func == "builtins.vars" and args:
                found |= {f"{o}.__dict__" for o in self.denote(args[0], scope, depth, seen)}
            elif func in PASS_THROUGH and args:
                found |= self.denote(args[0], scope, depth, seen)
            elif func in MODULE_CONTAINERS:
                found.add(f"{func}()")
                for arg in list(args) + [k.value for k in call.keywords]:
                    found |= self.denote(arg, scope, depth, seen)
            elif func in ("builtins.eval",) and args:
                text = self.fold(args[0], scope, depth)
                parsed = _parse_expression(text) if isinstance(text, str) else None
                if parsed is None:
                    self._note_dynamic({"torch"}, call)
                else:
                    found |= self.denote(parsed, scope, depth, seen)
            elif func.startswith("<lambda>") and func in self.lambdas:
                node, inner = self.lambdas[func]
                found |= self.denote(node.body, inner, depth, seen)
            elif (is_torch_name(func) and func.rsplit(".", 1)[-1][:1].isupper()) or (
                    func.startswith("<class>")):
                found.add(f"{func}()")  # an instance: nn.ReLU() is called like a function
        return found

    def _lookup(self, owners: set[str], name_expr: ast.expr, scope: Scope, depth: int,
                call: ast.Call) -> set[str]:
        name = self.fold(name_expr, scope, depth)
        if isinstance(name, str):
            return {_normal(f"{o}.{name}") for o in owners}
        self._note_dynamic(owners, call)
        return set()

    def _denote_subscript(self, expr: ast.Subscript, scope: Scope, depth: int,
                          seen: frozenset[int]) -> set[str]:
        bases = self.denote(expr.value, scope, depth, seen)
        key = self.fold(expr.slice, scope, depth)
        found: set[str] = set()
        for base in bases:
            if base.endswith(".__dict__") or base == "sys.modules":
                owner = base[: -len(".__dict__")] if base.endswith(".__dict__") else ""
                if isinstance(key, str):
                    found.add(_normal(f"{owner}.{key}" if owner else key))
                else:
                    self._note_dynamic({owner or "torch"}, expr)
        if not found:  # a container of functions (or modules): any element may be taken
            found = {b for b in bases if not b.endswith(".__dict__") and b != "sys.modules"}
        return found

    def _note_dynamic(self, owners: set[str], node: ast.AST) -> None:
        for owner in sorted(owners):
            if is_torch_name(owner):
                text = ast.unparse(node)
                text = text if len(text) <= 80 else text[:77] + "..."
                key = (node.lineno, node.col_offset)
                self.dynamic.setdefault(key, DynamicLookup(owner, node.lineno, text))
                return


def _binop(op: ast.operator, left: Any, right: Any) -> Any:
    if left is None or right is None:
        return None
    try:
        if isinstance(op, ast.Add) and type(left) is type(right) and isinstance(
                left, (str, int, float, tuple, list)):
            return left + right
        if isinstance(op, ast.Mult):
            text, times = (left, right) if isinstance(left, str) else (right, left)
            if isinstance(text, str) and isinstance(times, int) and not isinstance(times, bool):
                return text * times if len(text) * max(times, 0) <= MAX_FOLDED_CHARS else None
            if isinstance(left, (int, float)) and isinstance(right, (int, float)):
                return left * right
        if isinstance(op, ast.Mod) and isinstance(left, str) and isinstance(
                right, (str, int, float, tuple)):
            return left % right
        if isinstance(op, ast.Sub) and isinstance(left, (int, float)) and isinstance(
                right, (int, float)):
            return left - right
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _parse_expression(text: str) -> ast.expr | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
