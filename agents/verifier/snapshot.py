"""What a candidate is judged against, fixed before any candidate code runs (torch-free).

* `take_reference_snapshot`: the reference file and the local files it imports (the problem
  format runs a file with its folder on sys.path, so `import helpers` finds `helpers.py` or the
  `helpers/` package next to it) are read once, hashed (sha256) and copied into a private
  folder, read-only.  Both workers load the reference from that copy, never from the user's
  path.  After the run, the user's files and the copy are hashed again: any difference is
  `reference_modified`.
* `verifier_manifest`: sha256 of every source file of the verifier and of kernelstitch.core
  (worker, problem format, sandbox), taken before and after the run: `verifier_modified`.
* `watch_workspace`: the user's files that matter besides the reference (every .py file in the
  reference's folder, the candidate file), with the folder's list of .py files: the detection
  that stands in for the write guard where Landlock is missing (`workspace_modified`).
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kernelstitch.core.fingerprint import SUFFIXES, package_root

MAX_SNAPSHOT_FILES = 200
MAX_SNAPSHOT_BYTES = 16 << 20
MAX_WATCHED_FILES = 500
MAX_WATCHED_FILE_BYTES = 4 << 20
SNAPSHOT_DIR = "reference"


class SnapshotError(Exception):
    """The reference could not be snapshotted (unreadable, too many local files)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str | None:
    """The file's sha256, None when it is missing or unreadable."""
    try:
        return sha256_bytes(Path(path).read_bytes())
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# The reference and its local imports


def _imported_names(tree: ast.AST) -> set[str]:
    """Dotted module names an absolute import statement anywhere in the file may load."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _local_targets(name: str, root: Path) -> list[Path]:
    """The files below `root` that importing `name` (with root on sys.path) may run: a module
    file, or a whole package (every .py file in it: its own relative imports included)."""
    top = name.split(".")[0]
    module = root / f"{top}.py"
    package = root / top
    if (package / "__init__.py").is_file() and not package.is_symlink():
        return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    if module.is_file():
        return [module]
    return []


def local_import_closure(reference: Path) -> list[Path]:
    """The reference followed by every file below its folder that it imports, transitively."""
    reference = Path(reference).resolve()
    root = reference.parent
    found: list[Path] = [reference]
    queue = [reference]
    while queue:
        current = queue.pop()
        try:
            tree = ast.parse(current.read_bytes(), filename=str(current))
        except (OSError, SyntaxError, ValueError):
            continue
        for name in sorted(_imported_names(tree)):
            for target in _local_targets(name, root):
                target = target.resolve()
                if target not in found and target.is_relative_to(root):
                    found.append(target)
                    queue.append(target)
                    if len(found) > MAX_SNAPSHOT_FILES:
                        raise SnapshotError(
                            f"the reference imports more than {MAX_SNAPSHOT_FILES} local files "
                            f"from {root}; the verifier copies at most that many")
    return found


@dataclass
class ReferenceSnapshot:
    source: Path  # the user's reference file
    root: Path  # the private, read-only copy of its folder's imported files
    files: dict[str, str] = field(default_factory=dict)  # path relative to the folder -> sha256

    @property
    def copy(self) -> Path:
        """The reference file inside the snapshot: what the workers load."""
        return self.root / self.source.name

    @property
    def sha256(self) -> str:
        return self.files[self.source.name]

    @property
    def tree_sha256(self) -> str:
        return _manifest_hash(self.files)

    def changed_sources(self) -> list[str]:
        """Files of the user's that no longer match the snapshot (changed or gone)."""
        folder = self.source.parent
        return [rel for rel, digest in self.files.items()
                if sha256_file(folder / rel) != digest]

    def changed_copies(self) -> list[str]:
        """Files of the snapshot itself that changed (a write through the private folder)."""
        return [rel for rel, digest in self.files.items()
                if sha256_file(self.root / rel) != digest]


def take_reference_snapshot(reference: Path, destination: Path) -> ReferenceSnapshot:
    """Copy the reference and its local imports into `destination`/reference, read-only."""
    reference = Path(reference).resolve()
    folder = reference.parent
    root = Path(destination) / SNAPSHOT_DIR
    snapshot = ReferenceSnapshot(reference, root)
    total = 0
    try:
        sources = local_import_closure(reference)
        for path in sources:
            data = path.read_bytes()  # read once: the hash and the copy are of the same bytes
            total += len(data)
            if total > MAX_SNAPSHOT_BYTES:
                raise SnapshotError(f"the reference and its local imports exceed "
                                    f"{MAX_SNAPSHOT_BYTES >> 20} MiB")
            relative = path.relative_to(folder)
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
            snapshot.files[relative.as_posix()] = sha256_bytes(data)
    except OSError as exc:
        raise SnapshotError(f"cannot snapshot {reference}: {exc.strerror or exc}") from exc
    for directory in sorted({p for p in root.rglob("*") if p.is_dir()} | {root}, reverse=True):
        os.chmod(directory, stat.S_IRUSR | stat.S_IXUSR)
    return snapshot


def remove_snapshot(snapshot: ReferenceSnapshot) -> None:
    """Make the read-only copy writable again and delete it."""
    if not snapshot.root.exists():
        return
    for path in [snapshot.root, *snapshot.root.rglob("*")]:
        try:
            os.chmod(path, stat.S_IRWXU if path.is_dir() else stat.S_IRUSR | stat.S_IWUSR)
        except OSError:
            pass
    shutil.rmtree(snapshot.root, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# The verifier's own source


def _manifest_hash(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{files[name]}\n".encode())
    return digest.hexdigest()


def _source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES and p.name != "README.md"
                  and "__pycache__" not in p.parts and p.is_file())


@dataclass(frozen=True)
class Manifest:
    files: dict[str, str]  # "package/relative/path" -> sha256

    @property
    def sha256(self) -> str:
        return _manifest_hash(self.files)

    def changed(self, later: Manifest) -> list[str]:
        names = set(self.files) | set(later.files)
        return sorted(n for n in names if self.files.get(n) != later.files.get(n))


def verifier_roots() -> dict[str, Path]:
    """The packages whose code judges a candidate: the verifier and kernelstitch.core."""
    return {"kernelstitch.agents.verifier": Path(__file__).resolve().parent,
            "kernelstitch.core": package_root("kernelstitch.core").resolve()}


def verifier_manifest(roots: dict[str, Path] | None = None) -> Manifest:
    files = {}
    for package, root in (roots or verifier_roots()).items():
        for path in _source_files(root):
            files[f"{package}/{path.relative_to(root).as_posix()}"] = sha256_file(path) or ""
    return Manifest(files)


# --------------------------------------------------------------------------------------------
# The user's workspace (detection where no write guard is enforced)


@dataclass(frozen=True)
class WorkspaceState:
    files: dict[str, str | None]  # absolute path -> sha256 (None: missing)
    listing: dict[str, tuple[str, ...]]  # folder -> its .py file names
    skipped: int = 0  # files not watched (over the limits)

    def changed(self, later: WorkspaceState) -> list[str]:
        found = [p for p in self.files if later.files.get(p) != self.files[p]]
        for folder, names in self.listing.items():
            added = sorted(set(later.listing.get(folder, ())) - set(names))
            found += [str(Path(folder) / n) + " (new)" for n in added]
        return sorted(found)


def _py_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".py" and p.is_file())
    except OSError:
        return []


def watch_workspace(reference: Path, candidate: Path,
                    extra: tuple[Path, ...] = ()) -> WorkspaceState:
    """Hashes of the .py files in the reference's folder, the candidate and `extra` files."""
    folder = Path(reference).resolve().parent
    paths = _py_files(folder)
    for path in (Path(candidate).resolve(), *(Path(p).resolve() for p in extra)):
        if path not in paths:
            paths.append(path)
    files: dict[str, str | None] = {}
    skipped = 0
    for path in paths:
        try:
            too_big = path.stat().st_size > MAX_WATCHED_FILE_BYTES
        except OSError:
            too_big = False
        if too_big or len(files) >= MAX_WATCHED_FILES:
            skipped += 1
            continue
        files[str(path)] = sha256_file(path)
    listing = {str(folder): tuple(p.name for p in _py_files(folder))}
    return WorkspaceState(files, listing, skipped)


def rewatch(state: WorkspaceState) -> WorkspaceState:
    """The same files and folders, hashed again."""
    files = {p: sha256_file(Path(p)) for p in state.files}
    listing = {f: tuple(p.name for p in _py_files(Path(f))) for f in state.listing}
    return WorkspaceState(files, listing, state.skipped)
