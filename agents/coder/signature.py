"""The reference class's constructor and forward signatures, read from its source with `ast`
(so ModelNew can repeat them without importing anything)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Signature:
    positional_only: tuple[str, ...] = ()
    positional: tuple[str, ...] = ()
    varargs: str | None = None
    keyword_only: tuple[str, ...] = ()
    varkw: str | None = None
    defaults: frozenset[str] = field(default_factory=frozenset)  # names that have a default

    def parameters(self) -> str:
        """Parameter list text after `self`; every default becomes the `_UNSET` sentinel (the
        reference's own defaults apply: the call below omits unset arguments)."""
        parts: list[str] = []

        def one(name: str) -> str:
            return f"{name}=_UNSET" if name in self.defaults else name

        parts += [one(n) for n in self.positional_only]
        if self.positional_only:
            parts.append("/")
        parts += [one(n) for n in self.positional]
        if self.varargs:
            parts.append(f"*{self.varargs}")
        elif self.keyword_only:
            parts.append("*")
        parts += [one(n) for n in self.keyword_only]
        if self.varkw:
            parts.append(f"**{self.varkw}")
        return ", ".join(parts)

    def all_names(self) -> list[str]:
        names = list(self.positional_only) + list(self.positional)
        names += [self.varargs] if self.varargs else []
        names += list(self.keyword_only)
        names += [self.varkw] if self.varkw else []
        return names


def _of(fn: ast.FunctionDef) -> Signature:
    a = fn.args
    posonly = [x.arg for x in a.posonlyargs]
    regular = [x.arg for x in a.args]
    if posonly and posonly[0] == "self":
        posonly = posonly[1:]
    elif regular and regular[0] == "self":
        regular = regular[1:]
    positional = posonly + regular
    defaults = set(positional[len(positional) - len(a.defaults):]) if a.defaults else set()
    defaults |= {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}
    return Signature(tuple(posonly), tuple(regular), a.vararg.arg if a.vararg else None,
                     tuple(x.arg for x in a.kwonlyargs), a.kwarg.arg if a.kwarg else None,
                     frozenset(defaults))


def _method(tree: ast.Module, class_name: str, method: str,
            seen: set[str] | None = None) -> ast.FunctionDef | None:
    """The method as defined on the class or (same file) on its bases."""
    seen = seen or set()
    if class_name in seen:
        return None
    seen.add(class_name)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return None
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == method:
            return item
    for base in cls.bases:
        if isinstance(base, ast.Name):
            found = _method(tree, base.id, method, seen)
            if found is not None:
                return found
    return None


def constructor_signature(source: str, class_name: str) -> Signature:
    fn = _method(ast.parse(source), class_name, "__init__")
    return _of(fn) if fn is not None else Signature()


def forward_signature(source: str, class_name: str) -> Signature:
    fn = _method(ast.parse(source), class_name, "forward")
    return _of(fn) if fn is not None else Signature()
