"""The PyTorch ops a candidate's forward reaches, however spelled (pure `ast`, nothing runs).

Starting at `ModelNew.forward`, every function, method, class and lambda that forward calls or
hands on is walked (`self._compute` passed to a CUDA-graph runner, an autograd Function's
`apply`, `map(helper, ...)`), and each call, method call, `@` and reference to a torch op is
resolved through name_resolution: `getattr(torch, "re" + "lu")`, `torch.ops.aten.clamp.default`,
`from torch.nn.functional import hardtanh as h`, `nn.ReLU()(x)`, `operator.methodcaller("relu")`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from kernelstitch.agents.verifier.name_resolution import DynamicLookup, Resolver, Scope
from kernelstitch.agents.verifier.op_names import canonical_op, module_class_op

# Namespaces whose attributes are tensor ops (torch.relu, F.relu, torch._C._nn.gelu, ...).
OP_NAMESPACES = frozenset({
    "torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft", "torch.Tensor",
    "torch._C._nn", "torch._C._VariableFunctions", "torch._VF", "torch._C._special",
    "torch._C._linalg", "torch._C._fft", "torch._C.TensorBase", "torch._C._TensorBase",
    "torch._refs", "torch._refs.nn.functional", "torch._prims", "torch._decomp",
})
OPS_REGISTRY = "torch.ops."  # torch.ops.<library>.<op>[.<overload>]
# Calls that run code built at run time: nothing static can say what it calls.
RUNTIME_CODE = frozenset({"builtins.exec", "builtins.compile"})
TEXT_CHARS = 80
# Hooks run PyTorch code around forward without forward calling it.
HOOK_REGISTRATIONS = frozenset({"register_forward_hook", "register_forward_pre_hook",
                                "register_module_forward_hook",
                                "register_module_forward_pre_hook"})


@dataclass(frozen=True)
class OpUse:
    op: str  # canonical op name (op_names.canonical_op): relu, hardtanh, matmul
    line: int
    text: str  # the source that reaches it, shortened
    how: str  # call | method | reference | operator


@dataclass
class TorchUse:
    ops: list[OpUse] = field(default_factory=list)
    dynamic: list[DynamicLookup] = field(default_factory=list)


def op_of(qualname: str) -> str | None:
    """The torch op a qualified name stands for: `torch.ops.aten.relu_.default` -> relu,
    `torch.nn.functional.hardtanh` -> hardtanh, `torch.nn.ReLU()` -> relu; else None."""
    instance = qualname.endswith("()")
    name = qualname[:-2] if instance else qualname
    if name.startswith(OPS_REGISTRY):
        parts = name.split(".")
        return canonical_op(parts[3]) if len(parts) >= 4 and not instance else None
    namespace, _, last = name.rpartition(".")
    if (namespace == "torch.nn" or namespace.startswith("torch.nn.modules")) and last[:1].isupper():
        return module_class_op(last)  # the layer's class or an instance of it
    if not instance and namespace in OP_NAMESPACES and last and last not in (
            "nn", "ops", "cuda", "utils", "Tensor", "_C"):
        return canonical_op(last)
    return None


def _short(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 3] + "..."


def _parents(root: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(root) for child in ast.iter_child_nodes(node)}


def _in_callee_or_chain(node: ast.AST, parent: ast.AST | None) -> bool:
    """Part of a longer expression that is resolved as a whole (`torch` in `torch.relu`, the
    callee of a call)."""
    return (isinstance(parent, ast.Attribute) and parent.value is node) or (
        isinstance(parent, ast.Call) and parent.func is node) or (
        isinstance(parent, ast.Subscript) and parent.value is node)


class _Walker:
    def __init__(self, resolver: Resolver, module_names: set[str]) -> None:
        self.r = resolver
        self.module_names = module_names  # imports and module-level names: not tensors
        self.uses: dict[tuple[str, int], OpUse] = {}
        self.dynamic: dict[tuple[int, str], DynamicLookup] = {}
        self.queue: list[tuple[ast.AST, Scope]] = []
        self.done: set[int] = set()

    def add(self, op: str | None, node: ast.AST, how: str) -> None:
        if op:
            self.uses.setdefault((op, node.lineno), OpUse(op, node.lineno, _short(node), how))

    def follow(self, qualname: str) -> None:
        """Queue the file's own code that a name reaches."""
        r = self.r
        if qualname.startswith("<def>"):
            fn = r.functions.get(qualname[len("<def>"):].split(".")[0])
            if fn is not None:
                self.queue.append((fn, r.scope_of(fn)))
        elif qualname.startswith("<method>"):
            name = qualname[len("<method>"):].split(".")[0].removesuffix("()")
            if name in r.methods:
                self.queue.append((r.methods[name], r.scope_of(r.methods[name])))
        elif qualname.startswith("<class>"):
            name = qualname[len("<class>"):].split(".")[0].removesuffix("()")
            cls = r.classes.get(name)
            for item in cls.body if cls is not None else []:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.queue.append((item, r.scope_of(item)))
        elif qualname.startswith("<lambda>") and qualname in r.lambdas:
            self.queue.append(r.lambdas[qualname])

    def is_value(self, node: ast.AST, scope: Scope) -> bool:
        """A receiver that is a tensor as far as we can tell: a local or an expression, not a
        module, `self`/`self.X` (an extension's `self.ext.relu` is not torch's), or `super()`."""
        if isinstance(node, ast.Name):
            return node.id != "self" and node.id not in self.module_names and not (
                self.r.denote(node, scope))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id == "super"):
            return False
        if isinstance(node, ast.Attribute):
            return False
        return not self.r.denote(node, scope)

    def walk(self, entries: list[tuple[ast.AST, Scope]]) -> TorchUse:
        self.queue.extend(entries)
        while self.queue:
            fn, scope = self.queue.pop()
            if id(fn) in self.done:
                continue
            self.done.add(id(fn))
            self.visit(fn, scope)
        for found in self.r.dynamic.values():
            self.dynamic.setdefault((found.line, found.text), found)
        return TorchUse(sorted(self.uses.values(), key=lambda u: (u.line, u.op)),
                        sorted(self.dynamic.values(), key=lambda d: d.line))

    def visit(self, fn: ast.AST, scope: Scope) -> None:
        parents = _parents(fn)
        body = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
        for node in (n for stmt in body for n in ast.walk(stmt)):
            parent = parents.get(id(node))
            if isinstance(node, ast.Call):
                self.visit_call(node, scope)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) or (
                    isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult)):
                self.add("matmul", node, "operator")
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Lambda)) \
                    and not isinstance(getattr(node, "ctx", ast.Load()), (ast.Store, ast.Del)) \
                    and not _in_callee_or_chain(node, parent):
                for qualname in self.r.denote(node, scope):
                    self.add(op_of(qualname), node, "reference")
                    self.follow(qualname)

    def visit_call(self, call: ast.Call, scope: Scope) -> None:
        r = self.r
        targets = r.denote(call.func, scope)
        for qualname in targets:
            self.add(op_of(qualname), call, "call")
            self.follow(qualname)
            if qualname in RUNTIME_CODE:
                self.dynamic.setdefault((call.lineno, "exec"), DynamicLookup(
                    "builtins", call.lineno, _short(call)))
        func = call.func
        if not targets and isinstance(func, ast.Attribute) and self.is_value(func.value, scope):
            self.add(canonical_op(func.attr), call, "method")  # x.relu(), y.clamp_(min=0)
        if isinstance(func, ast.Call) and func.args:
            inner = r.denote(func.func, scope)
            if inner == {"builtins.getattr"} and len(func.args) >= 2 and self.is_value(
                    func.args[0], scope):
                name = r.fold(func.args[1], scope)  # getattr(x, "re" + "lu")()
                if isinstance(name, str):
                    self.add(canonical_op(name), call, "method")
                else:
                    self.dynamic.setdefault((call.lineno, "method"), DynamicLookup(
                        "torch.Tensor", call.lineno, _short(func)))
            elif inner == {"operator.methodcaller"}:
                name = r.fold(func.args[0], scope)
                if isinstance(name, str):
                    self.add(canonical_op(name), call, "method")
                else:
                    self.dynamic.setdefault((call.lineno, "method"), DynamicLookup(
                        "torch.Tensor", call.lineno, _short(func)))


def _entry_points(resolver: Resolver) -> list[tuple[ast.AST, Scope]]:
    """What runs when the module is called: forward, an overridden __call__, and the hooks the
    file registers (each registration walked as a one-expression function in its scope)."""
    entries = [(resolver.methods[name], resolver.scope_of(resolver.methods[name]))
               for name in ("forward", "__call__") if name in resolver.methods]
    defs = list(resolver.methods.values()) + list(resolver.functions.values())
    scoped = [(d, resolver.scope_of(d)) for d in defs] + [(resolver.tree, resolver.module_scope)]
    for owner, scope in scoped:
        for node in ast.walk(owner):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in HOOK_REGISTRATIONS):
                holder = ast.Lambda(args=ast.arguments([], [], None, [], [], None, []), body=node)
                entries.append((holder, scope))
    return entries


def forward_torch_use(resolver: Resolver, module_names: set[str]) -> TorchUse:
    """The ops that calling ModelNew reaches, and its lookups no static reading can resolve."""
    if "forward" not in resolver.methods:
        return TorchUse()
    resolver.dynamic.clear()  # only lookups reached from forward count
    return _Walker(resolver, module_names).walk(_entry_points(resolver))
