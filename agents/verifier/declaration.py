"""Who may declare PyTorch calls: only the built-in coder, in the file it wrote, for its plan.

A candidate's `KERNELSTITCH_TORCH_OPS` (the ops it still runs through PyTorch, e.g. a cuDNN
convolution) excuses those ops from the op-reuse rules.  A file written by a model rewarded for
passing could simply declare the ops it copies, so a declaration counts only when

* the caller says the file is the built-in coder's own output (`CandidateOrigin.BUILTIN`: the
  pipeline that just generated it; every other caller gets the default, UNTRUSTED), and
* its `KERNELSTITCH_PLAN_BINDING` recomputes: the sha256 of the whole file (the plan literal, the
  declaration, the kernel sources, forward) with the binding's own value blanked.  Copying the
  header into another file, or editing one character of the declaration, breaks it.

The hash is not a secret: it binds the declaration to the exact file the built-in coder wrote,
and the origin says that the built-in coder wrote it.

Every other candidate may still leave ops to PyTorch, but only through a `TorchOpAllowance`:
granted by the caller from what it trusts (the pipeline: the built-in planner's plan of the same
module, its `library_call` / `pytorch_fallback` steps), never read from the candidate's text.
The static rules and the profiler check excuse exactly its ops for that one verification, and
the verdict records them with where they came from.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

DECLARATION_NAME = "KERNELSTITCH_TORCH_OPS"
# The coder writes the binding (agents/coder/wrapper.py `bind`); the layers keep coder and
# verifier apart, so each spells the name and domain, and tests/test_verifier_binding.py checks
# that they agree on every example.
BINDING_NAME = "KERNELSTITCH_PLAN_BINDING"
_DOMAIN = b"kernelstitch builtin-coder binding v1\0"
_BINDING_LINE = re.compile(rf'^{BINDING_NAME} = "([0-9a-f]*)"[ \t]*$', re.MULTILINE)


class CandidateOrigin(str, Enum):
    UNTRUSTED = "untrusted"  # an LLM's reply, a user's file, anything read back from disk
    BUILTIN = "builtin"  # the built-in coder's output, verified by the run that generated it


@dataclass(frozen=True)
class TorchOpAllowance:
    """PyTorch ops one candidate may run, granted by the caller (never by the candidate).

    `ops`: profiler names (`aten::conv2d`, and the ops that call runs inside it) -> the kind of
    step that keeps them in PyTorch (library_call / pytorch_fallback).  `source`: where the
    grant comes from, recorded in the verdict ("the built-in planner's plan of Model: s1
    library_call ...").  `calls`: how to call them (`torch.ops.aten.conv2d.default`), told to
    an LLM coder; not used by any check."""

    ops: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    calls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", {str(k): str(v) for k, v in sorted(self.ops.items())})
        object.__setattr__(self, "calls", tuple(str(c) for c in self.calls))

    def to_json(self) -> dict[str, Any]:
        return {"ops": dict(self.ops), "source": self.source, "calls": list(self.calls)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TorchOpAllowance | None:
        if not data:
            return None
        return cls(dict(data.get("ops", {})), str(data.get("source", "")),
                   tuple(data.get("calls", ())))


@dataclass(frozen=True)
class Declaration:
    ops: dict[str, str] = field(default_factory=dict)  # accepted: trusted and bound, else {}
    present: bool = False  # the file has a KERNELSTITCH_TORCH_OPS assignment
    notes: tuple[str, ...] = ()


def binding_digest(source: str) -> str:
    """The binding of a file: its sha256 with the binding's own value blanked."""
    text = source.replace("\r\n", "\n")
    blanked = _BINDING_LINE.sub(f'{BINDING_NAME} = ""', text)
    return hashlib.sha256(_DOMAIN + blanked.encode("utf-8")).hexdigest()


def is_bound(source: str, tree: ast.Module) -> bool:
    """One binding line, the module-level assignment it is, and the digest recomputes."""
    matches = _BINDING_LINE.findall(source.replace("\r\n", "\n"))
    if len(matches) != 1:
        return False
    assigned = [n.value.value for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == BINDING_NAME for t in n.targets)
                and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    return assigned == matches and matches[0] == binding_digest(source)


def _literal(tree: ast.Module) -> tuple[bool, dict[str, str] | None, str | None]:
    """(present, the literal dict or None, why it is unusable)."""
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
        if not any(isinstance(t, ast.Name) and t.id == DECLARATION_NAME for t in targets):
            continue
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError):
            return True, None, f"{DECLARATION_NAME} (line {node.lineno}) is not a literal dict"
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return True, None, f"{DECLARATION_NAME} must map aten op names to a kind (str -> str)"
        return True, dict(value), None
    return False, None, None


def read_declaration(source: str, tree: ast.Module, origin: CandidateOrigin) -> Declaration:
    """The declaration the Verifier honours for this file (empty unless trusted and bound)."""
    present, ops, problem = _literal(tree)
    if not present:
        return Declaration()
    if problem:
        return Declaration(present=True, notes=(f"{problem}: ignored",))
    if not ops:
        return Declaration(present=True)  # declares nothing: nothing to honour or ignore
    if origin is not CandidateOrigin.BUILTIN:
        return Declaration(present=True, notes=(
            f"{DECLARATION_NAME} ignored: only the built-in coder's own output may declare "
            "PyTorch calls; this candidate's PyTorch ops are judged like any others (only an "
            "allowance its caller grants excuses any)",))
    if not is_bound(source, tree):
        return Declaration(present=True, notes=(
            f"{DECLARATION_NAME} ignored: {BINDING_NAME} does not match this file (edited or "
            "copied after the built-in coder wrote it)",))
    return Declaration(ops=ops or {}, present=True)
