"""Static anti-hacking rules on the candidate's source (pure `ast`: nothing is executed).

Each rule yields a `Reason` with the candidate line it is about.  The rules are heuristics that
name the obvious ways to game a benchmark; the dynamic checks in worker processes are the real
guard (fresh seeds, poisoned memory, the profiler), so a rule here only fires on patterns that
have no honest use inside a `ModelNew.forward`.

Rules:
* no `ModelNew` class                                       -> no_model_new
* forward (or a same-file helper it calls) calls `super().forward`, the reference class or an
  `nn.*`/reference submodule assigned in `__init__`         -> calls_reference_forward
* `torch.compile`, `torch._dynamo`, `torch._inductor`, `torch.jit.script/trace` anywhere
  (also named through `getattr` of constant strings or `importlib`) -> uses_torch_compile
* assignment / `setattr` / `mock.patch` on torch, time, triton, builtins, sys.modules
                                                            -> timer_tampering (timers, events,
                                                               synchronisation), else
                                                               monkeypatches_runtime
* forward returns a tensor kept on `self` / a global that forward itself fills -> cached_output
* `try:` around a non-torch (kernel) call whose handler computes with torch -> silent_fallback
* calling the module (forward, an overridden `__call__`, forward hooks, and every helper,
  base-class method, lambda or autograd Function they reach) reaches a torch op the
  reference's forward uses, or one computing the same function class (relu as hardtanh,
  clamp_min or relu6; linear as addmm or einsum), however spelled: `getattr(torch, "re" +
  "lu")` and other constant string building, module-level constant names,
  `torch.ops.aten.relu_.default`, aliases and re-exports (`h = F.hardtanh`, `ops =
  torch.ops.aten`, `import torch.nn.functional as Fn`), tensor methods, `nn.ReLU()(x)`, `@`
  (name_resolution.py, torch_use.py); only the ops of a trusted, bound
  `KERNELSTITCH_TORCH_OPS` and those of an allowance the caller grants (`TorchOpAllowance`:
  the pipeline's, from the built-in plan of the module) are excused (declaration.py)
                                                            -> reuses_reference_op
* forward looks up an attribute of torch / F / torch.ops / a tensor by a name no static
  reading can compute (`getattr(F, name)` with name an argument), or runs `eval`/`exec` code
                                                            -> dynamic_torch_lookup
* the reference computes and the file compiles, loads or imports no GPU code of its own (no
  load_inline / extension / Triton / CuPy / native source)  -> no_custom_kernel
* code or embedded C++ that runs PyTorch ops past the profiler (`redispatch`, record-function
  guards, `at::native::`, the `*_cuda_dispatch.h` / `CUDAFunctions.h` direct entry points)
                                                            -> hides_torch_ops

The report also lists the vendor-library functions the embedded native source calls
(`cublasLtMatmul`, `cudnn...`): only then may library kernels in the profile count as the
candidate's own work (assemble.py).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelstitch.agents.verifier.declaration import (
    CandidateOrigin,
    TorchOpAllowance,
    read_declaration,
)
from kernelstitch.agents.verifier.name_resolution import Resolver, import_aliases
from kernelstitch.agents.verifier.op_names import (
    COMPUTE_METHODS,
    NON_COMPUTE_OPS,
    base_name,
)
from kernelstitch.agents.verifier.own_kernel import own_kernel_evidence
from kernelstitch.agents.verifier.reference_reuse import (
    ReferenceInfo,
    dynamic_lookups,
    module_names,
    no_custom_kernel,
    reference_info,
    reused_reference_ops,
)
from kernelstitch.agents.verifier.torch_use import forward_torch_use
from kernelstitch.agents.verifier.verdict import Reason

CANDIDATE_CLASS = "ModelNew"

# Module roots a candidate must never patch.
PROTECTED_ROOTS = ("torch", "time", "triton", "builtins", "sys", "time.perf_counter")
# Any patched name containing one of these tampers with timing rather than just the runtime.
TIMER_WORDS = ("time", "Event", "event", "synchronize", "perf_counter", "elapsed", "monotonic",
               "profiler", "record", "clock")
COMPILE_PREFIXES = ("torch.compile", "torch._dynamo", "torch._inductor", "torch.jit.script",
                    "torch.jit.trace", "torch.compiler.compile")
# Qualified prefixes whose last component is a tensor op (torch.relu, F.relu, torch.linalg.norm).
OP_NAMESPACES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg", "torch.fft",
                 "torch.Tensor")
STREAM_NAMES = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.set_stream",
                "torch.cuda.ExternalStream", "torch.Stream")
CUDA_STREAM_SOURCE_MARKERS = ("getStreamFromPool", "cudaStreamCreate", "cudaStreamCreateWithFlags")
# Ways to run PyTorch's kernels without the profiler recording an aten op (so that PyTorch's own
# cuBLAS/cuDNN call would look like the candidate's direct library call): searched in the
# Python names and in every string (embedded C++).  No honest candidate needs them.
PROFILER_BYPASS = re.compile(
    r"redispatch|RecordFunctionGuard|_set_record_function|_dispatch_call|at::native::|"
    r"ATen/native/|_cuda_dispatch\.h|CUDAFunctions\.h|c10::Dispatcher")
# Vendor-library entry points in the embedded native source (a direct call, followed by "(").
LIBRARY_API_CALL = re.compile(r"\b(cublasLt\w+|cublas\w+|cudnn\w+|cutlass::\w+(?:::\w+)*)\s*[(<]")
# Calls that are plainly not kernels (used to recognise "a custom kernel call" in a `try`).
BUILTIN_CALLS = frozenset({"len", "print", "isinstance", "int", "float", "str", "tuple", "list",
                           "range", "super", "getattr", "hasattr", "type", "min", "max", "dict"})


@dataclass
class StaticReport:
    reasons: list[Reason] = field(default_factory=list)
    # The declaration honoured: a trusted, bound built-in file's, else empty (declaration.py).
    declared_torch_ops: dict[str, str] = field(default_factory=dict)
    origin: CandidateOrigin = CandidateOrigin.UNTRUSTED
    # PyTorch ops the caller allows this candidate (never read from the file): declaration.py.
    allowance: TorchOpAllowance | None = None
    uses_streams: bool = False  # the dynamic stream checks name what they find side-stream work
    library_api_calls: list[str] = field(default_factory=list)  # cublasLtMatmul, cudnn..., sorted
    notes: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> bool:
        return bool(self.reasons)

    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    @property
    def excused_torch_ops(self) -> dict[str, str]:
        """The ops no reuse rule counts: the honoured declaration's and the allowance's."""
        allowed = dict(self.allowance.ops) if self.allowance is not None else {}
        return {**allowed, **self.declared_torch_ops}


# --------------------------------------------------------------------------------------------
# Name resolution


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def qualified(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """`F.relu` -> `torch.nn.functional.relu` when F is imported; None for unknown roots."""
    dotted = _dotted(node)
    if not dotted:
        return None
    root, _, rest = dotted.partition(".")
    if root not in aliases:
        return None
    full = aliases[root]
    return f"{full}.{rest}" if rest else full


def _torch_op(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """The op name of `torch.X(...)` / `F.X(...)`, else None."""
    name = qualified(call.func, aliases)
    if not name:
        return None
    namespace, _, op = name.rpartition(".")
    return op if namespace in OP_NAMESPACES else None


def _method_op(call: ast.Call, aliases: dict[str, str]) -> str | None:
    """`x.relu()` on a local value (not a module, not `self.something`) -> `relu`."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    if isinstance(receiver, ast.Name) and (receiver.id in aliases or receiver.id == "self"):
        return None
    if isinstance(receiver, ast.Attribute) and _dotted(receiver) is not None:
        return None  # self.ext.f(...), module.sub.f(...): not a tensor method
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name) and (
        receiver.func.id == "super"
    ):
        return None
    return func.attr


# --------------------------------------------------------------------------------------------
# The file's structure


@dataclass
class _Candidate:
    tree: ast.Module
    aliases: dict[str, str]
    cls: ast.ClassDef | None
    methods: dict[str, ast.FunctionDef]
    functions: dict[str, ast.FunctionDef]
    submodules: dict[str, int]  # self.X assigned an nn.* / reference module in __init__ -> line
    resolver: Resolver


def _class_methods(cls: ast.ClassDef | None) -> dict[str, ast.FunctionDef]:
    if cls is None:
        return {}
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def _submodules(init: ast.FunctionDef | None, aliases: dict[str, str],
                reference_classes: set[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    if init is None:
        return found
    for node in ast.walk(init):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        name = qualified(node.value.func, aliases) or _dotted(node.value.func) or ""
        last = name.rsplit(".", 1)[-1]
        is_nn = name.startswith("torch.nn.") and last[:1].isupper()
        is_ref = last in reference_classes
        if not (is_nn or is_ref):
            continue
        for target in node.targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                found[target.attr] = node.lineno
    return found


def _module_level_names(tree: ast.Module) -> dict[str, str]:
    """Names bound by module-level assignments (e.g. `ext = load_inline(...)`): calls on them
    are calls into that object (a compiled extension), not tensor methods."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = target.id
    return names


def _parse_candidate(tree: ast.Module, reference_classes: set[str]) -> _Candidate:
    aliases = {**_module_level_names(tree), **import_aliases(tree)}
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef)
                and n.name == CANDIDATE_CLASS), None)
    methods = _class_methods(cls)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    submodules = _submodules(methods.get("__init__"), aliases, reference_classes)
    return _Candidate(tree, aliases, cls, methods, functions, submodules,
                      Resolver(tree, CANDIDATE_CLASS))


def _forward_closure(cand: _Candidate) -> list[ast.FunctionDef]:
    """forward plus the same-file helpers it reaches (self.method(...) and module functions)."""
    start = cand.methods.get("forward")
    if start is None:
        return []
    seen: dict[int, ast.FunctionDef] = {}
    stack = [start]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in cand.functions:
                stack.append(cand.functions[func.id])
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and func.value.id == "self" and func.attr in cand.methods
                  and func.attr != "forward"):
                stack.append(cand.methods[func.attr])
    return list(seen.values())


# --------------------------------------------------------------------------------------------
# Rules


def _compile_use(cand: _Candidate) -> list[Reason]:
    reasons = []
    for node in ast.walk(cand.tree):
        names: set[str] = set()
        if isinstance(node, (ast.Attribute, ast.Name)):
            names = {qualified(node, cand.aliases) or ""}
        elif isinstance(node, ast.Call):  # getattr(torch, "com" + "pile"), import_module(...)
            names = cand.resolver.denote(node, cand.resolver.module_scope)
        for name in sorted(n for n in names if n.startswith(COMPILE_PREFIXES))[:1]:
            reasons.append(Reason("uses_torch_compile",
                                  f"uses {name}: torch.compile/JIT does the work the "
                                  "candidate claims to replace", node.lineno))
    return _first_per_line(reasons)


def _protected_target(name: str | None) -> bool:
    return bool(name) and any(name == r or name.startswith(r + ".") for r in PROTECTED_ROOTS)


def _patch_reason(name: str, line: int) -> Reason:
    if any(word in name for word in TIMER_WORDS):
        return Reason("timer_tampering", f"replaces {name}: timing and synchronisation must "
                      "not be patched", line)
    return Reason("monkeypatches_runtime", f"replaces {name}: the runtime must not be patched",
                  line)


def _monkeypatching(cand: _Candidate) -> list[Reason]:
    reasons = []
    for node in ast.walk(cand.tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            if isinstance(target, ast.Attribute):
                name = qualified(target, cand.aliases)
                if _protected_target(name) and "." in name:
                    reasons.append(_patch_reason(name, node.lineno))
            elif isinstance(target, ast.Subscript):
                name = qualified(target.value, cand.aliases)
                if name == "sys.modules":
                    reasons.append(Reason("monkeypatches_runtime",
                                          "replaces entries of sys.modules", node.lineno))
        if isinstance(node, ast.Call):
            func = qualified(node.func, cand.aliases) or _dotted(node.func) or ""
            if func in ("setattr", "builtins.setattr", "object.__setattr__") and node.args:
                owner = qualified(node.args[0], cand.aliases)
                if _protected_target(owner):
                    attr = node.args[1].value if len(node.args) > 1 and isinstance(
                        node.args[1], ast.Constant) else "?"
                    reasons.append(_patch_reason(f"{owner}.{attr}", node.lineno))
            elif func.endswith(("mock.patch", "mock.patch.object")) and node.args:
                first = node.args[0]
                text = (first.value if isinstance(first, ast.Constant) and isinstance(
                    first.value, str) else qualified(first, cand.aliases)) or ""
                if _protected_target(text):
                    reasons.append(_patch_reason(text, node.lineno))
    return _first_per_line(reasons)


def _reference_forward_calls(cand: _Candidate, helpers: list[ast.FunctionDef],
                             reference_classes: set[str]) -> list[Reason]:
    reasons = []
    for fn in helpers:
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__"):
                receiver = func.value
                if isinstance(receiver, ast.Call) and _dotted(receiver.func) == "super":
                    reasons.append(Reason("calls_reference_forward",
                                          "calls super().forward: the reference does the work",
                                          node.lineno))
                    continue
                owner = _dotted(receiver) or ""
                if owner.rsplit(".", 1)[-1] in reference_classes:
                    reasons.append(Reason("calls_reference_forward",
                                          f"calls {owner}.forward: the reference does the work",
                                          node.lineno))
                    continue
            if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id == "self" and func.attr in cand.submodules):
                reasons.append(Reason(
                    "calls_reference_forward",
                    f"calls the PyTorch submodule self.{func.attr} (created on line "
                    f"{cand.submodules[func.attr]}): PyTorch does the work", node.lineno))
            elif isinstance(func, ast.Call):  # Model(...)(x)
                inner = _dotted(func.func) or ""
                if inner.rsplit(".", 1)[-1] in reference_classes:
                    reasons.append(Reason("calls_reference_forward",
                                          f"builds and calls the reference {inner}",
                                          node.lineno))
    return _first_per_line(reasons)


def _self_or_global_names(fn: ast.FunctionDef) -> set[str]:
    """`self.X` attributes and declared globals that fn assigns (directly or by item)."""
    globals_ = {name for node in ast.walk(fn) if isinstance(node, ast.Global)
                for name in node.names}
    stored: set[str] = set()
    for node in ast.walk(fn):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                stored.add(f"self.{target.attr}")
            elif isinstance(target, ast.Name) and target.id in globals_:
                stored.add(target.id)
    return stored


def _names_in(expr: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
            node.value.id == "self"
        ):
            names.add(f"self.{node.attr}")
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def _cached_outputs(helpers: list[ast.FunctionDef]) -> list[Reason]:
    reasons = []
    stored: set[str] = set()
    for fn in helpers:
        stored |= _self_or_global_names(fn)
    if not stored:
        return []
    for fn in helpers:
        # local names bound from a stored cache: `out = self.cache` then `return out`
        aliases = set(stored)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _names_in(node.value) & stored:
                aliases |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                hit = _names_in(node.value) & aliases
                if hit:
                    reasons.append(Reason(
                        "cached_output",
                        f"returns {sorted(hit)[0]}, which forward stores between calls: outputs "
                        "must be computed from each call's inputs", node.lineno))
    return _first_per_line(reasons)


def _torch_compute_calls(node: ast.AST, cand: _Candidate, extra_methods: set[str]) -> list[
        tuple[str, int]]:
    found = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        op = _torch_op(sub, cand.aliases)
        if op and op not in NON_COMPUTE_OPS and base_name(op) not in NON_COMPUTE_OPS:
            found.append((op, sub.lineno))
            continue
        method = _method_op(sub, cand.aliases)
        if method and (method in COMPUTE_METHODS or method in extra_methods) and (
            method not in NON_COMPUTE_OPS
        ):
            found.append((method, sub.lineno))
        elif (isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Name)
              and sub.func.value.id == "self" and sub.func.attr in cand.submodules):
            found.append((f"self.{sub.func.attr}", sub.lineno))
        elif isinstance(sub.func, ast.Attribute) and sub.func.attr == "forward":
            found.append(("forward", sub.lineno))
    return found


def _is_kernel_call(call: ast.Call, cand: _Candidate) -> bool:
    name = qualified(call.func, cand.aliases)
    if name and name.split(".")[0] in ("torch", "math", "time", "builtins"):
        return False
    dotted = _dotted(call.func)
    if dotted is None or dotted in BUILTIN_CALLS:
        return False
    if isinstance(call.func, ast.Attribute) and _method_op(call, cand.aliases) is not None:
        return False  # x.relu(): a tensor method, not a kernel
    return True


def _silent_fallbacks(cand: _Candidate, helpers: list[ast.FunctionDef],
                      reference_ops: set[str]) -> list[Reason]:
    reasons = []
    for fn in helpers:
        for node in ast.walk(fn):
            if not isinstance(node, ast.Try):
                continue
            body_calls = [c for stmt in node.body for c in ast.walk(stmt)
                          if isinstance(c, ast.Call)]
            if not any(_is_kernel_call(c, cand) for c in body_calls):
                continue
            for handler in node.handlers:
                compute = _torch_compute_calls(handler, cand, reference_ops)
                if compute:
                    op, line = compute[0]
                    reasons.append(Reason(
                        "silent_fallback",
                        f"when the kernel call on line {node.lineno} fails, the handler "
                        f"computes with PyTorch ({op}) instead of reporting the failure",
                        line, {"try_line": node.lineno}))
    return reasons


def _uses_streams(cand: _Candidate, helpers: list[ast.FunctionDef]) -> bool:
    for fn in helpers:
        for node in ast.walk(fn):
            if isinstance(node, (ast.Attribute, ast.Name)):
                name = qualified(node, cand.aliases) or ""
                if name.startswith(STREAM_NAMES) or name.endswith(".wait_stream"):
                    return True
    return any(marker in node.value for node in _strings(cand.tree)
               for marker in CUDA_STREAM_SOURCE_MARKERS)


def _strings(tree: ast.Module) -> list[ast.Constant]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _profiler_bypass(cand: _Candidate) -> list[Reason]:
    """PyTorch ops run where the profiler records no aten op: in Python names or embedded C++."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(cand.tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = qualified(node, cand.aliases) or ""
            match = PROFILER_BYPASS.search(name)
            if match:
                found.append((match.group(0), node.lineno))
    for node in _strings(cand.tree):
        match = PROFILER_BYPASS.search(node.value)
        if match:
            line = node.lineno + node.value.count("\n", 0, match.start())
            found.append((match.group(0), line))
    return [Reason("hides_torch_ops", f"`{what}` runs PyTorch ops past the dispatcher's "
                   "profiling, where the Verifier cannot see whose kernels run", line)
            for what, line in found]


def _library_api_calls(tree: ast.Module) -> list[str]:
    return sorted({m.group(1) for node in _strings(tree)
                   for m in LIBRARY_API_CALL.finditer(node.value)})


def _first_per_line(reasons: list[Reason]) -> list[Reason]:
    seen: set[tuple[str, int | None]] = set()
    kept = []
    for reason in reasons:
        key = (reason.code, reason.line)
        if key not in seen:
            seen.add(key)
            kept.append(reason)
    return kept


# --------------------------------------------------------------------------------------------
# Entry point


def check_source(candidate_source: str, reference_source: str | None = None,
                 reference_class: str | None = None,
                 origin: CandidateOrigin = CandidateOrigin.UNTRUSTED,
                 allowance: TorchOpAllowance | None = None) -> StaticReport:
    """The static rules on one candidate.  `origin`: BUILTIN only where the caller has just had
    the built-in coder write this file; its bound declaration then excuses the ops it lists.
    `allowance`: PyTorch ops the caller allows whatever the origin (the pipeline grants an LLM
    candidate the ops the built-in plan of the module leaves to PyTorch); exactly those are
    excused, and the file has no say in it."""
    origin = CandidateOrigin(origin)
    report = StaticReport(origin=origin, allowance=allowance)
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as exc:
        report.reasons.append(Reason("compile_error", f"syntax error: {exc.msg}", exc.lineno))
        return report
    reference = reference_info(reference_source or "", reference_class)
    ref_classes = set(reference.class_names) | {"Model"}
    cand = _parse_candidate(tree, ref_classes)
    declaration = read_declaration(candidate_source, tree, origin)
    report.declared_torch_ops, report.notes = dict(declaration.ops), list(declaration.notes)
    if cand.cls is None:
        report.reasons.append(Reason("no_model_new", "the file defines no class ModelNew", None))
    elif "forward" not in cand.methods:
        report.reasons.append(Reason("no_model_new", "ModelNew defines no forward method",
                                     cand.cls.lineno))
    helpers = _forward_closure(cand)
    report.reasons += _compile_use(cand)
    report.reasons += _monkeypatching(cand)
    report.reasons += _first_per_line(_profiler_bypass(cand))
    report.library_api_calls = _library_api_calls(tree)
    report.reasons += _reference_forward_calls(cand, helpers, ref_classes)
    report.reasons += _cached_outputs(helpers)
    report.reasons += _silent_fallbacks(cand, helpers, set(reference.forward_ops))
    report.reasons += _torch_work(cand, reference, report)
    report.uses_streams = _uses_streams(cand, helpers)
    if report.uses_streams:
        report.notes.append("the candidate uses CUDA streams: checked for unjoined work")
    return report


def _torch_work(cand: _Candidate, reference: ReferenceInfo, report: StaticReport) -> list[
        Reason]:
    """PyTorch doing the reference's work, however spelled, and no kernel of its own."""
    use = forward_torch_use(cand.resolver, module_names(cand.resolver))
    reasons = _first_per_line(reused_reference_ops(use, reference, report.excused_torch_ops))
    reasons += _first_per_line(dynamic_lookups(use))
    evidence = own_kernel_evidence(cand.tree, cand.resolver)
    reasons += no_custom_kernel(cand.methods.get("forward"), evidence, reference)
    if report.declared_torch_ops:
        report.notes.append("declared PyTorch calls excused (the built-in coder's, bound to its "
                            f"plan): {', '.join(sorted(report.declared_torch_ops))}")
    if report.allowance is not None:
        ops = ", ".join(report.allowance.ops) or "none"
        report.notes.append(f"PyTorch calls allowed by the caller: {ops} (from "
                            f"{report.allowance.source or 'an unnamed source'})")
    return reasons


def check_files(candidate: Path, reference: Path | None = None,
                reference_class: str | None = None,
                origin: CandidateOrigin = CandidateOrigin.UNTRUSTED,
                allowance: TorchOpAllowance | None = None) -> StaticReport:
    ref_text = Path(reference).read_text(encoding="utf-8") if reference else None
    return check_source(Path(candidate).read_text(encoding="utf-8"), ref_text, reference_class,
                        origin, allowance)
