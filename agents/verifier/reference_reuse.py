"""Static rules on PyTorch doing the reference's work: reuses_reference_op, dynamic_torch_lookup,
no_custom_kernel (pure `ast`; the profiler's op and kernel trace is the dynamic counterpart)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelstitch.agents.verifier.name_resolution import Resolver
from kernelstitch.agents.verifier.op_names import NON_COMPUTE_OPS, canonical_op, op_families
from kernelstitch.agents.verifier.torch_use import TorchUse, forward_torch_use, op_of
from kernelstitch.agents.verifier.verdict import Reason

REFERENCE_CLASS = "Model"


@dataclass(frozen=True)
class ReferenceInfo:
    class_names: frozenset[str]  # module classes of the reference file
    forward_ops: frozenset[str]  # canonical names of the torch ops its forward uses (nn layers)
    computes: bool = False  # its forward computes anything (an op or tensor arithmetic)


def module_names(resolver: Resolver) -> set[str]:
    """Imports and module-level names: receivers that are not tensors."""
    return (set(resolver.imports) | set(resolver.module_scope.bindings) | set(resolver.functions)
            | set(resolver.classes))


def reference_info(source: str, class_name: str | None = None) -> ReferenceInfo:
    """The reference's class names and the torch ops its forward reaches (the reference is
    trusted code: its layers' constructors in __init__ count too)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ReferenceInfo(frozenset(), frozenset())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name != "ModelNew"]
    chosen = [c for c in classes if c.name == (class_name or REFERENCE_CLASS)] or classes
    ops: set[str] = set()
    computes = False
    for cls in chosen:
        resolver = Resolver(tree, cls.name)
        ops |= {use.op for use in forward_torch_use(resolver, module_names(resolver)).ops}
        for method in resolver.methods.values():
            scope = resolver.scope_of(method)
            for node in ast.walk(method):
                if isinstance(node, ast.Call):
                    ops |= {op for q in resolver.denote(node.func, scope) if (op := op_of(q))}
        forward = resolver.methods.get("forward")
        computes |= forward is not None and any(
            isinstance(n, (ast.Call, ast.BinOp)) for n in ast.walk(forward))
    ops -= NON_COMPUTE_OPS
    return ReferenceInfo(frozenset(c.name for c in classes), frozenset(ops),
                         computes or bool(ops))


def reused_reference_ops(use: TorchUse, reference: ReferenceInfo,
                         excused_ops: dict[str, str]) -> list[Reason]:
    """forward reaches a torch op of the reference's, or one computing the same function class
    (relu as hardtanh or clamp_min, linear as addmm), not excused (`excused_ops`: a trusted
    declaration's and the caller's allowance: exactly those ops, not their families)."""
    related = {ref: op_families(ref) for ref in sorted(reference.forward_ops)}
    excused = {canonical_op(name) for name in excused_ops}
    allowed = (f" (only {', '.join(sorted(excused))} may stay in PyTorch here)" if excused
               else "")
    reasons = []
    for found in use.ops:
        if found.op in NON_COMPUTE_OPS or found.op in excused:
            continue
        ref = next((r for r, family in related.items() if found.op in family), None)
        if ref is None:
            continue
        same = ("which the reference uses for the same work" if found.op == ref
                else f"which computes what the reference's {ref} does")
        reasons.append(Reason(
            "reuses_reference_op",
            f"forward reaches PyTorch's {found.op} (`{found.text}`), {same}: that work must be "
            f"the candidate's own kernel{allowed}", found.line,
            {"op": found.op, "reference_op": ref, "how": found.how}))
    return reasons


def dynamic_lookups(use: TorchUse) -> list[Reason]:
    return [Reason(
        "dynamic_torch_lookup",
        f"`{d.text}` looks up {d.namespace} by a name only known at run time: no honest forward "
        "needs that, and no static reading can tell which op it runs", d.line,
        {"namespace": d.namespace}) for d in use.dynamic]


def no_custom_kernel(forward: ast.FunctionDef | None, evidence: str | None,
                     reference: ReferenceInfo) -> list[Reason]:
    """The reference computes, and the file builds, loads or imports no GPU code of its own."""
    if forward is None or evidence is not None or not reference.computes:
        return []
    return [Reason(
        "no_custom_kernel",
        "the file compiles, loads or imports no kernel of its own (no load_inline, extension, "
        "Triton/CuPy/Numba kernel or native source): only PyTorch can be doing the work",
        forward.lineno)]
