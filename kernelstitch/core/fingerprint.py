"""A hash of source trees: results computed by older code are not reused (the bench's resume
key, the measured search's cached decisions)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

# Files that count: code, prompts, kernel templates, data (not docs or caches).
SUFFIXES = (".py", ".md", ".cu", ".cuh", ".h", ".txt", ".json")


def package_root(name: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(name)
    return Path(next(iter(spec.submodule_search_locations)))


def tree_fingerprint(parts: dict[str, tuple[str, ...]], roots: dict[str, Path],
                     salt: str = "") -> str:
    """sha256 over the named files and folders (`parts[package]`, relative to
    `roots[package]`), their paths included; README.md files and caches do not count."""
    digest = hashlib.sha256(salt.encode())
    for package, names in parts.items():
        root = roots[package]
        for name in names:
            target = root / name
            files = sorted(target.rglob("*")) if target.is_dir() else [target]
            for path in files:
                if (path.is_file() and path.suffix in SUFFIXES and path.name != "README.md"
                        and "__pycache__" not in path.parts):
                    digest.update(f"{package}/{path.relative_to(root).as_posix()}".encode())
                    digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
