"""Code actions on a module class or its `forward`.

Listing is cheap: it reads the cached scan and at most one `stat` per action, and leaves the
command/edit empty; codeAction/resolve fills them in (the scaffold parses the file, the insert
edit reads the generated file).  Every action carries `data` naming what resolve needs.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelstitch.server.diagnostics import NO_INPUTS_CODE
from kernelstitch.server.discovery import DocumentScan
from kernelstitch.server.files import read_source
from kernelstitch.server.scaffold import build_scaffold
from lsprotocol import types as lsp

from kernelstitch.core.problem import CANDIDATE_CLASS, ModuleInfo

CMD_GENERATE = "kernelstitch.generate"
CMD_PROFILE = "kernelstitch.profile"
CMD_VERIFY = "kernelstitch.verify"
CMD_CANCEL = "kernelstitch.cancel"
CMD_ADD_INPUTS = "kernelstitch.addExampleInputs"
CMD_OPEN_GENERATED = "kernelstitch.openGenerated"
COMMANDS = (CMD_GENERATE, CMD_PROFILE, CMD_VERIFY, CMD_CANCEL, CMD_ADD_INPUTS,
            CMD_OPEN_GENERATED)

KIND_GENERATE = "refactor.rewrite.kernelstitch"
KIND_RUN = "source.kernelstitch"
_MAX_INSERT_LINES = 800

TITLES = {
    "generate": "KernelStitch: Generate CUDA implementation",
    "profile": "KernelStitch: Profile this module",
    "verify": "KernelStitch: Verify generated implementation",
    "cancel": "KernelStitch: Cancel the running job",
    "addInputs": "KernelStitch: Add example inputs",
    "insert": "KernelStitch: Insert ModelNew into this file",
    "open": "KernelStitch: Open generated implementation",
}
_ACTION_COMMAND = {"generate": CMD_GENERATE, "profile": CMD_PROFILE, "verify": CMD_VERIFY,
                   "cancel": CMD_CANCEL, "open": CMD_OPEN_GENERATED}


@dataclass(frozen=True)
class ModuleState:
    """What listing needs beyond the scan, found by the server for the module at the cursor."""

    candidate_path: Path | None  # the generated file, if it exists
    job_active: bool


def module_for_range(doc: DocumentScan, rng: lsp.Range) -> ModuleInfo | None:
    """The module whose `class` or `def forward` line the range touches."""
    first, last = rng.start.line + 1, rng.end.line + 1
    for info in doc.scan.problems():
        anchors = [info.line] + ([info.forward_line] if info.forward_line else [])
        if any(first <= a <= last for a in anchors):
            return info
    return None


def anchors_match(doc: DocumentScan, lines: list[str], rng: lsp.Range) -> bool:
    """Does the (possibly older) scan still describe the requested lines of `lines`?

    True when the module found for the range still has its `class`/`def forward` text on the
    same lines, or when no module is found and none of the requested lines could start one.
    """
    info = module_for_range(doc, rng)
    if info is None:
        requested = lines[rng.start.line : rng.end.line + 1]
        return not any(_could_anchor(text) for text in requested)
    class_moved = not _line(lines, info.line).lstrip().startswith(f"class {info.name}")
    forward_moved = (info.forward_line is not None
                     and "def forward" not in _line(lines, info.forward_line))
    return not (class_moved or forward_moved)


def _line(lines: list[str], number: int) -> str:
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _could_anchor(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.startswith("class ") or "def forward" in stripped


def list_actions(doc: DocumentScan, info: ModuleInfo, state: ModuleState,
                 context: lsp.CodeActionContext, source_stem: str) -> list[lsp.CodeAction]:
    def action(name: str, kind: str, diagnostics: list[lsp.Diagnostic] | None = None,
               preferred: bool = False, **extra: str) -> lsp.CodeAction:
        return lsp.CodeAction(title=TITLES[name], kind=kind, diagnostics=diagnostics,
                              is_preferred=preferred or None,
                              data={"action": name, "uri": doc.uri, "module": info.name, **extra})

    if state.job_active:
        return [action("cancel", KIND_RUN)]
    actions: list[lsp.CodeAction] = []
    if info.has_inputs:
        actions.append(action("generate", KIND_GENERATE))
        actions.append(action("profile", KIND_RUN))
    else:
        ours = [d for d in context.diagnostics if d.code == NO_INPUTS_CODE
                and isinstance(d.data, dict) and d.data.get("module") == info.name]
        actions.append(action("addInputs", lsp.CodeActionKind.QuickFix, ours, preferred=True))
    if state.candidate_path is not None:
        if info.has_inputs:
            actions.append(action("verify", KIND_RUN))
        if can_insert(doc, state.candidate_path, source_stem):
            actions.append(action("insert", KIND_GENERATE, candidate=str(state.candidate_path),
                                  stem=source_stem))
        else:
            actions.append(action("open", KIND_RUN))
    return actions


def resolve_action(action: lsp.CodeAction, source_text: str | None) -> lsp.CodeAction:
    """Fill in the command or edit of a listed action; leaves unknown actions as they are."""
    data = action.data if isinstance(action.data, dict) else {}
    name, uri, module = data.get("action"), data.get("uri"), data.get("module")
    if not isinstance(uri, str) or not isinstance(module, str):
        return action
    if name in _ACTION_COMMAND:
        action.command = lsp.Command(title=TITLES[name], command=_ACTION_COMMAND[name],
                                     arguments=[uri, module])
    elif name == "addInputs" and source_text is not None:
        action.edit = add_inputs_edit(uri, source_text, module)
    elif name == "insert" and source_text is not None:
        candidate = data.get("candidate")
        if isinstance(candidate, str):
            action.edit = insert_candidate_edit(uri, source_text, Path(candidate),
                                                str(data.get("stem", "")))
    return action


# -- example inputs ----------------------------------------------------------------------------
def add_inputs_edit(uri: str, text: str, module: str) -> lsp.WorkspaceEdit | None:
    """Insert the scaffold two blank lines after the class; None when the text does not parse."""
    scaffold = build_scaffold(text, module)
    if scaffold is None:
        return None
    end_line = _class_end_line(text, module)
    if end_line is None:
        return None
    lines = text.splitlines()
    index = min(end_line, len(lines)) - 1
    position = lsp.Position(index, _utf16_len(lines[index]) if lines else 0)
    edit = lsp.TextEdit(lsp.Range(position, position), "\n\n\n" + scaffold.text)
    return lsp.WorkspaceEdit(changes={uri: [edit]})


def _class_end_line(text: str, module: str) -> int | None:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == module:
            return node.end_lineno
    return None


# -- inserting the generated class -------------------------------------------------------------
@dataclass(frozen=True)
class CandidateFacts:
    """What decides whether a generated file can simply be appended to the user's file."""

    body: str  # the text to append (`from __future__` lines dropped: they must come first)
    defined: frozenset[str]  # top-level classes and functions
    imported: frozenset[str]  # absolute module names it imports
    relative_imports: bool

    def insertable_into(self, user_names: set[str], source_stem: str) -> bool:
        return (CANDIDATE_CLASS in self.defined
                and not self.relative_imports
                and source_stem not in self.imported  # importing the user's file: circular
                and not ((self.defined - {CANDIDATE_CLASS}) & user_names)
                and self.body.count("\n") <= _MAX_INSERT_LINES)


_facts_cache: dict[tuple[str, int, int], CandidateFacts | None] = {}


def candidate_facts(path: Path) -> CandidateFacts | None:
    """Facts of a generated file, parsed once per version of it; None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _facts_cache:
        _facts_cache[key] = _read_facts(path)
    return _facts_cache[key]


def _read_facts(path: Path) -> CandidateFacts | None:
    try:
        text = read_source(path)
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return None
    imported: set[str] = set()
    relative = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            relative |= bool(node.level)
            if node.module:
                imported.add(node.module.split(".")[0])
    kept = [line for line in text.splitlines() if not line.startswith("from __future__")]
    return CandidateFacts(
        body="\n".join(kept).strip("\n"),
        defined=frozenset(n.name for n in tree.body
                          if isinstance(n, (ast.ClassDef, ast.FunctionDef))),
        imported=frozenset(imported),
        relative_imports=relative,
    )


def user_names(doc: DocumentScan) -> set[str]:
    return set(doc.scan.functions) | {m.name for m in doc.scan.modules}


def can_insert(doc: DocumentScan, candidate: Path, source_stem: str) -> bool:
    if doc.scan.module(CANDIDATE_CLASS) is not None:
        return False  # the file already has a ModelNew
    facts = candidate_facts(candidate)
    return facts is not None and facts.insertable_into(user_names(doc), source_stem)


def insert_candidate_edit(uri: str, text: str, candidate: Path,
                          source_stem: str) -> lsp.WorkspaceEdit | None:
    facts = candidate_facts(candidate)
    names = _top_level_names(text)
    if facts is None or names is None or not facts.insertable_into(names, source_stem):
        return None
    lines = text.splitlines()
    end = lsp.Position(max(len(lines) - 1, 0), _utf16_len(lines[-1]) if lines else 0)
    header = f"# Generated by KernelStitch from {candidate.name}; review before relying on it."
    edit = lsp.TextEdit(lsp.Range(end, end), f"\n\n\n{header}\n{facts.body}\n")
    return lsp.WorkspaceEdit(changes={uri: [edit]})


def _top_level_names(text: str) -> set[str] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    return {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}


def action_data(action: lsp.CodeAction) -> dict[str, Any]:
    return action.data if isinstance(action.data, dict) else {}


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
