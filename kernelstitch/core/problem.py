"""The problem format: which nn.Module classes a file holds and how to get their example inputs.

One convention, KernelBench's, extended for files with several modules:

* ``get_inputs()`` returns the positional arguments of ``forward`` (a list of tensors/values);
* ``get_init_inputs()`` returns the constructor's positional arguments (optional: default ``[]``);
* the plain names apply to the class named ``Model`` or, when the file defines a single
  module class, to that class; any class ``Foo`` can have its own ``get_inputs_Foo()`` and
  ``get_init_inputs_Foo()``, which win over the plain names.

``scan_source`` works on source text alone (ast, no torch, no execution) and is what the
language server calls on every edit; ``load_problem`` executes the file and is only ever called
inside a worker process.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Base-class spellings that make a class an nn.Module without looking further.
_MODULE_BASES = {"Module", "nn.Module", "torch.nn.Module"}
# Names a generated implementation uses; not a problem of its own.
CANDIDATE_CLASS = "ModelNew"
DEFAULT_CLASS = "Model"


class ProblemError(Exception):
    """A problem file could not be used; the message says why and how to fix it."""


@dataclass(frozen=True)
class SourceError:
    message: str
    line: int  # 1-based
    column: int  # 0-based


@dataclass(frozen=True)
class ModuleInfo:
    """A torch.nn.Module subclass found in source text."""

    name: str
    line: int  # 1-based line of the `class` statement
    end_line: int
    name_column: int  # 0-based column of the class name, for editor ranges
    forward_line: int | None
    inputs_fn: str | None  # function giving forward's arguments
    init_inputs_fn: str | None  # function giving the constructor's arguments (None: no args)

    @property
    def has_inputs(self) -> bool:
        return self.inputs_fn is not None

    def missing_inputs_message(self) -> str:
        # Plain get_inputs serves the class named Model (and a file's only module); any class
        # has its own get_inputs_<Name> (the README's convention).
        own = self.name == DEFAULT_CLASS
        inputs, init = ("get_inputs", "get_init_inputs") if own else (
            f"get_inputs_{self.name}", f"get_init_inputs_{self.name}")
        return (
            f"{self.name} has no example inputs: add `def {inputs}(): return "
            f"[torch.randn(...)]` (the arguments of forward) and, if the constructor takes "
            f"arguments, `def {init}(): return [...]` at module level"
            + ("." if own else " (plain get_inputs also works when it is the file's only module).")
        )


@dataclass(frozen=True)
class SourceScan:
    modules: tuple[ModuleInfo, ...] = ()
    error: SourceError | None = None
    functions: frozenset[str] = field(default_factory=frozenset)

    def module(self, name: str) -> ModuleInfo | None:
        return next((m for m in self.modules if m.name == name), None)

    def problems(self) -> tuple[ModuleInfo, ...]:
        """Modules a user can generate for (generated candidates excluded)."""
        return tuple(m for m in self.modules if m.name != CANDIDATE_CLASS)


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_base_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):  # Generic[...] style bases
        return _base_name(node.value)
    return ""


def _aliased_module_bases(tree: ast.Module) -> set[str]:
    """Base spellings naming nn.Module through an import alias (`from torch import nn as tnn`)."""
    bases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name == "torch":
                    bases.add(f"{alias.asname}.nn.Module")
                elif alias.asname and alias.name == "torch.nn":
                    bases.add(f"{alias.asname}.Module")
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                bound = alias.asname or alias.name
                if node.module == "torch" and alias.name == "nn":
                    bases.add(f"{bound}.Module")
                elif alias.name == "Module" and f"{node.module}.".startswith("torch.nn."):
                    bases.add(bound)
    return bases


@dataclass(frozen=True)
class ClassSummary:
    """What the scan needs of one top-level class (lines relative to its tree's first line)."""

    name: str
    line: int
    end_line: int
    name_column: int
    forward_line: int | None
    bases: frozenset[str]

    def shifted(self, by: int) -> ClassSummary:
        return ClassSummary(self.name, self.line + by, self.end_line + by, self.name_column,
                            None if self.forward_line is None else self.forward_line + by, self.bases)


@dataclass(frozen=True)
class TreeSummary:
    """A parsed run of top-level statements, reduced to what `scan_of_summary` reads: what an
    incremental scan caches per chunk of a file (core/incremental_scan.py)."""

    classes: tuple[ClassSummary, ...] = ()
    functions: frozenset[str] = frozenset()
    alias_bases: frozenset[str] = frozenset()

    def shifted(self, by: int) -> TreeSummary:
        return TreeSummary(tuple(c.shifted(by) for c in self.classes), self.functions, self.alias_bases)


def summarise_tree(tree: ast.Module) -> TreeSummary:
    classes = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        forward = next((n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and n.name == "forward"), None)
        classes.append(ClassSummary(cls.name, cls.lineno, cls.end_lineno or cls.lineno,
                                    cls.col_offset + len("class "), forward.lineno if forward else None,
                                    frozenset(_base_name(b) for b in cls.bases)))
    functions = frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return TreeSummary(tuple(classes), functions, frozenset(_aliased_module_bases(tree)))


def merge_summaries(parts: list[TreeSummary]) -> TreeSummary:
    return TreeSummary(tuple(c for p in parts for c in p.classes),
                       frozenset().union(*(p.functions for p in parts)),
                       frozenset().union(*(p.alias_bases for p in parts)))


def _module_classes(summary: TreeSummary) -> list[ClassSummary]:
    """Top-level classes deriving from nn.Module, directly or through another class here."""
    known_bases = _MODULE_BASES | summary.alias_bases
    module_names: set[str] = set()
    changed = True
    while changed:  # fixed point: class B(A) where A(nn.Module) is defined later in the file
        changed = False
        for cls in summary.classes:
            if cls.name in module_names:
                continue
            if cls.bases & known_bases or cls.bases & module_names:
                module_names.add(cls.name)
                changed = True
    return [c for c in summary.classes if c.name in module_names]


def _inputs_functions(
    name: str, functions: set[str], sole_problem: bool
) -> tuple[str | None, str | None]:
    own_inputs, own_init = f"get_inputs_{name}", f"get_init_inputs_{name}"
    if own_inputs in functions:
        return own_inputs, own_init if own_init in functions else None
    if (name == DEFAULT_CLASS or sole_problem) and "get_inputs" in functions:
        return "get_inputs", "get_init_inputs" if "get_init_inputs" in functions else None
    return None, None


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone UTF-16 surrogate replaced by U+FFFD: one code unit for one, so lines
    and columns stay where the editor has them (Python itself refuses such source)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scan_source(text: str) -> SourceScan:
    """Find module classes and their inputs convention in source text; never raises."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return _scan_of_syntax_error(exc)
    except UnicodeEncodeError:  # a lone UTF-16 surrogate (an editor may send any code unit)
        clean = replace_lone_surrogates(text)
        return scan_source(clean) if clean != text else SourceScan(
            error=SourceError(message="the text cannot be encoded as UTF-8", line=1, column=0))
    except (MemoryError, RecursionError):  # nesting deeper than the parser's stack
        return SourceScan(error=SourceError(message="nested too deeply for Python's parser", line=1, column=0))
    try:
        return scan_of_summary(summarise_tree(tree))
    except RecursionError:  # walking a tree deeper than the interpreter's recursion limit
        return SourceScan(error=SourceError(message="nested too deeply to scan", line=1, column=0))


def scan_of_summary(summary: TreeSummary) -> SourceScan:
    classes = _module_classes(summary)
    problem_count = sum(1 for c in classes if c.name != CANDIDATE_CLASS)
    modules = []
    for cls in classes:
        inputs_fn, init_fn = _inputs_functions(cls.name, set(summary.functions), problem_count == 1)
        modules.append(ModuleInfo(name=cls.name, line=cls.line, end_line=cls.end_line,
                                  name_column=cls.name_column, forward_line=cls.forward_line,
                                  inputs_fn=inputs_fn, init_inputs_fn=init_fn))
    return SourceScan(modules=tuple(modules), functions=summary.functions)


def _scan_of_syntax_error(exc: SyntaxError) -> SourceScan:
    return SourceScan(
        error=SourceError(
            message=f"syntax error: {exc.msg}",
            line=exc.lineno or 1,
            column=max((exc.offset or 1) - 1, 0),
        )
    )


def resolve_module(path: Path, class_name: str | None) -> ModuleInfo:
    """Pick the module a command talks about; `class_name` None means the file's main one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ProblemError(f"cannot read {path}: {exc.strerror or exc}") from exc
    scan = scan_source(text)
    if scan.error:
        raise ProblemError(f"{path}:{scan.error.line}: {scan.error.message}")
    problems = scan.problems()
    if class_name:
        found = scan.module(class_name)
        if not found:
            names = ", ".join(m.name for m in scan.modules) or "none"
            raise ProblemError(f"{path}: no nn.Module class {class_name!r} (found: {names})")
        return found
    if not problems:
        raise ProblemError(f"{path}: no torch.nn.Module subclass found")
    default = next((m for m in problems if m.name == DEFAULT_CLASS), None)
    if default:
        return default
    if len(problems) == 1:
        return problems[0]
    names = ", ".join(m.name for m in problems)
    raise ProblemError(f"{path}: several modules ({names}); name one as {path}::NAME")


def split_target(target: str) -> tuple[Path, str | None]:
    """`file.py::Module` -> (Path, 'Module'); plain `file.py` -> (Path, None)."""
    path, _, name = target.partition("::")
    return Path(path), (name or None)


# --------------------------------------------------------------------------------------------
# Execution side (worker processes only: this runs the user's code).

_module_counter = itertools.count()


@dataclass
class LoadedProblem:
    path: Path
    info: ModuleInfo
    module_class: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]
    namespace: Any  # the executed Python module

    def build(self) -> Any:
        try:
            return self.module_class(*self.get_init_inputs())
        except Exception as exc:  # user code: any exception is a problem-level error
            raise ProblemError(
                f"{self.info.name}(*{self.info.init_inputs_fn or '[]'}()) raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def inputs(self) -> list[Any]:
        try:
            values = self.get_inputs()
        except Exception as exc:
            raise ProblemError(
                f"{self.info.inputs_fn}() raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(values, (list, tuple)):
            raise ProblemError(f"{self.info.inputs_fn}() must return a list, got {type(values)}")
        return list(values)


def import_file(path: Path, prefix: str = "ks_user") -> Any:
    """Execute a Python file as a fresh module (unique name, its folder on sys.path)."""
    path = Path(path).resolve()
    name = f"_{prefix}_{next(_module_counter)}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise ProblemError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ProblemError(f"importing {path} raised {type(exc).__name__}: {exc}") from exc
    return module


def load_problem(path: Path, class_name: str | None = None) -> LoadedProblem:
    info = resolve_module(path, class_name)
    if not info.has_inputs:
        raise ProblemError(info.missing_inputs_message())
    namespace = import_file(path)
    cls = getattr(namespace, info.name)
    get_inputs = getattr(namespace, info.inputs_fn)  # type: ignore[arg-type]
    get_init = getattr(namespace, info.init_inputs_fn) if info.init_inputs_fn else (lambda: [])
    return LoadedProblem(Path(path), info, cls, get_inputs, get_init, namespace)
