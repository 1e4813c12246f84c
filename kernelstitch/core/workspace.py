"""Where KernelStitch keeps its files inside a user's project.

    <root>/.kernelstitch/                      state folder (with a .gitignore of `*`)
        runs.sqlite                            the run store
        pending/                               run-store records waiting to be merged
        <src__path__stem>/<Module>/            outputs for one module: model_new.py, report.md

The root is the nearest ancestor holding .git, pyproject.toml, setup.py or .kernelstitch.
Stdlib only.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelstitch.core.runstore import RunStore

STATE_DIR_NAME = ".kernelstitch"
ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", STATE_DIR_NAME)
RUNSTORE_NAME = "runs.sqlite"


# Markers of a project (not of a state folder some run left behind).
PROJECT_MARKERS = tuple(m for m in ROOT_MARKERS if m != STATE_DIR_NAME)


def find_workspace_root(path: str | os.PathLike[str],
                        within: str | os.PathLike[str] | None = None) -> Path:
    """The nearest ancestor of `path` holding a root marker, else the file's own folder.
    `within` (the editor's workspace folder holding `path`): above it only a project's markers
    count (a repository that holds the opened folder, as the CLI finds it), not a lone
    .kernelstitch a CLI run left in the home folder or /tmp; with none, `within` is the root."""
    path = Path(path).resolve()
    start = path if path.is_dir() else path.parent
    limit = Path(within).resolve() if within is not None else None
    above = False  # past `within`
    for folder in (start, *start.parents):
        markers = PROJECT_MARKERS if above else ROOT_MARKERS
        if any((folder / marker).exists() for marker in markers):
            return folder
        if folder == limit:
            above = True
    return limit if above else start


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` so that readers see the old file or the new one, never half.

    A temporary file in the same folder is written, flushed to disk and renamed over the
    target (os.replace is atomic on POSIX and Windows).  An existing file keeps its mode.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.chmod(temp_name, path.stat().st_mode & 0o7777)
        except FileNotFoundError:
            os.chmod(temp_name, 0o666 & ~_umask())
        os.replace(temp_name, path)
    except BaseException:
        try:
            os.unlink(temp_name)
        except FileNotFoundError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _output_folder_name(source: Path, root: Path) -> str:
    """`src/models/mlp.py` -> `src__models__mlp`; outside the root, a hash-prefixed stem."""
    stem_path = source.with_suffix("") if source.suffix == ".py" else source
    try:
        relative = stem_path.relative_to(root)
    except ValueError:
        digest = hashlib.sha256(str(source).encode("utf-8")).hexdigest()[:10]
        return f"_external_{digest}__{stem_path.name}"
    return "__".join(relative.parts)


def module_output_path(
    root: str | os.PathLike[str], source_path: str | os.PathLike[str], module: str
) -> Path:
    """Where a module's generated files go, computed without creating anything.

    A relative `source_path` is taken relative to `root`.
    """
    if not module.isidentifier():
        raise ValueError(f"module {module!r} is not a Python class name")
    root = Path(root).resolve()
    source = Path(source_path)
    source = (source if source.is_absolute() else root / source).resolve()
    return root / STATE_DIR_NAME / _output_folder_name(source, root) / module


class Workspace:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._runstore: RunStore | None = None

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def state_dir(self) -> Path:
        """root/.kernelstitch, created on first use with a .gitignore that ignores it all."""
        state = self.root / STATE_DIR_NAME
        state.mkdir(parents=True, exist_ok=True)
        gitignore = state / ".gitignore"
        if not gitignore.exists():
            write_text_atomic(gitignore, "# created by KernelStitch: nothing here is source\n*\n")
        return state

    def output_dir(self, source_path: str | os.PathLike[str], module: str) -> Path:
        """The folder for one module's generated files (created); see module_output_path."""
        folder = module_output_path(self.root, source_path, module)
        self.state_dir  # noqa: B018 - creates the state folder and its .gitignore first
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def runstore_path(self) -> Path:
        return self.state_dir / RUNSTORE_NAME

    def runstore(self) -> RunStore:
        """The workspace's run store (opened once per Workspace; it holds no connection)."""
        if self._runstore is None:
            from kernelstitch.core.runstore import RunStore  # runstore imports this module

            self._runstore = RunStore(self.runstore_path)
        return self._runstore

    def write_text_atomic(self, path: str | os.PathLike[str], text: str) -> Path:
        return write_text_atomic(path, text)
