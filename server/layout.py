"""Where a workspace keeps generated files: kernelstitch.core.workspace's layout, computed
here without creating anything (no torch, no user code, no folders)."""

from __future__ import annotations

import os
from pathlib import Path

from kernelstitch.core.workspace import (
    RUNSTORE_NAME,
    STATE_DIR_NAME,
    find_workspace_root,
    module_output_path,
)

STATE_DIR = STATE_DIR_NAME
CANDIDATE_FILE = "model_new.py"
REPORT_FILE = "report.md"


def workspace_root(path: Path, folders: list[Path] | tuple[Path, ...] = ()) -> Path:
    """The workspace a source file belongs to: core's rule (the one the CLI uses, so editor
    and terminal share generated files), told the innermost of the editor's workspace `folders`
    that holds the file (above it, a stray .kernelstitch is not the user's root).  A file the
    folder reaches through a symlink that leads outside it belongs to that folder."""
    given = Path(os.path.abspath(path))
    resolved = given.resolve()
    holding = [Path(f) for f in folders
               if resolved.is_relative_to(Path(f).resolve()) or given.is_relative_to(os.path.abspath(f))]
    if not holding:
        return Path(find_workspace_root(resolved))
    within = max(holding, key=lambda f: len(Path(os.path.abspath(f)).parts)).resolve()
    if not resolved.is_relative_to(within):  # through a symlink: the search would start outside
        return within
    return Path(find_workspace_root(resolved, within))


def output_dir(root: Path, source: Path, module: str) -> Path:
    """Where the job writes a module's files; asking must not litter the tree with folders."""
    return module_output_path(root, source, module)


def runstore_file(root: Path) -> Path | None:
    """The workspace's run store, only if a job already created it (reading never creates)."""
    path = Path(root) / STATE_DIR_NAME / RUNSTORE_NAME
    return path if path.is_file() else None


def candidate_path(root: Path, source: Path, module: str) -> Path:
    return output_dir(root, source, module) / CANDIDATE_FILE


def is_generated_file(path: Path) -> bool:
    return Path(path).name == CANDIDATE_FILE and STATE_DIR in Path(path).parts


def source_of_candidate(candidate: Path) -> tuple[Path, str] | None:
    """(source file, module) a generated file belongs to, from the folder layout alone.

    `<root>/.kernelstitch/src__models__mlp/Block/model_new.py` -> (`<root>/src/models/mlp.py`,
    "Block").  File names holding "__" make the folder name ambiguous: every split is tried.
    """
    candidate = Path(candidate).resolve()
    if not is_generated_file(candidate) or len(candidate.parents) < 4:
        return None
    module, folder, state = candidate.parent.name, candidate.parent.parent.name, \
        candidate.parent.parent.parent
    if state.name != STATE_DIR:
        return None
    root = state.parent
    parts = folder.split("__")
    for guess in _joins(parts):
        source = root.joinpath(*guess).with_suffix(".py")
        if source.is_file():
            return source, module
    return None


def _joins(parts: list[str]) -> list[list[str]]:
    """Ways to read a__b__c back as path parts: a/b/c, a__b/c, a/b__c, a__b__c."""
    if len(parts) <= 1:
        return [parts]
    out = []
    for rest in _joins(parts[1:]):
        out.append([parts[0], *rest])
        out.append([f"{parts[0]}__{rest[0]}", *rest[1:]])
    return out[:64]  # absurd names: stop guessing
