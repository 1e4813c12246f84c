"""Find the problems of a bench folder: `*.py` files directly, or KernelBench's level folders.

    DIR/1_Square_matrix_multiplication_.py          -> problem "1_Square_matrix_multiplication_"
    DIR/level1/19_ReLU.py, DIR/level2/...            -> problems "level1/19_ReLU", ...
    DIR = .../level1 itself                          -> level "1", names "19_ReLU", ...
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_LEVEL_ARG = re.compile(r"^(?:level[_-]?)?(\d+)$", re.IGNORECASE)


class BenchError(Exception):
    """The benchmark cannot start (bad folder, options, missing package); the message says why."""


@dataclass(frozen=True)
class ProblemSpec:
    name: str
    path: Path
    level: str | None
    sha256: str  # of the file's bytes: the resume key's problem part
    module: str | None = None  # None: the file's main module (Model)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "level": self.level,
                "sha256": self.sha256, "module": self.module}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemSpec:
        return cls(name=data["name"], path=Path(data["path"]), level=data.get("level"),
                   sha256=data["sha256"], module=data.get("module"))


def parse_level(text: str) -> str:
    match = _LEVEL_ARG.match(text.strip())
    if not match:
        raise BenchError(f"--levels takes level numbers such as 1 or level2, got {text!r}")
    return str(int(match.group(1)))


def _natural_key(path: Path) -> tuple:
    """19_ReLU before 100_X: KernelBench names start with the problem number."""
    return tuple(int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.stem))


def _problem_files(folder: Path) -> list[Path]:
    return sorted((p for p in folder.glob("*.py") if not p.name.startswith("_")),
                  key=_natural_key)


def _spec(path: Path, name: str, level: str | None) -> ProblemSpec:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return ProblemSpec(name=name, path=path.resolve(), level=level, sha256=digest)


def discover(directory: Path, levels: list[str] | None = None,
             only: list[str] | None = None) -> list[ProblemSpec]:
    directory = Path(directory)
    if not directory.is_dir():
        raise BenchError(f"not a folder: {directory}")
    wanted = {parse_level(level) for level in levels or []}
    own = _LEVEL_DIR.match(directory.resolve().name)
    specs = [_spec(p, p.stem, str(int(own.group(1))) if own else None)
             for p in _problem_files(directory)]
    level_dirs = sorted(
        ((str(int(m.group(1))), d) for d in directory.iterdir()
         if d.is_dir() and (m := _LEVEL_DIR.match(d.name))),
        key=lambda item: int(item[0]),
    )
    for level, folder in level_dirs:
        specs += [_spec(p, f"{folder.name}/{p.stem}", level) for p in _problem_files(folder)]
    if wanted:
        found = {s.level for s in specs if s.level}
        missing = sorted(wanted - found, key=int)
        if missing:
            raise BenchError(f"no problems for level(s) {', '.join(missing)} in {directory} "
                             f"(levels found: {', '.join(sorted(found, key=int)) or 'none'})")
        specs = [s for s in specs if s.level in wanted]
    if only:
        names = {n.strip() for item in only for n in item.split(",") if n.strip()}  # a,b or repeated
        specs = [s for s in specs if s.name in names or s.path.stem in names]
    if not specs:
        raise BenchError(f"no problems (*.py files) to run in {directory}"
                         + (f" matching --only {' '.join(only)}" if only else ""))
    return specs
