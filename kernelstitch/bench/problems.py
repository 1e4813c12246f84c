"""Find the problems of a bench folder: `*.py` files directly, or KernelBench's level folders.

    DIR/1_Square_matrix_multiplication_.py          -> problem "1_Square_matrix_multiplication_"
    DIR/level1/19_ReLU.py, DIR/level2/...            -> problems "level1/19_ReLU", ...
    DIR = .../level1 itself                          -> level "1", names "19_ReLU", ...
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_LEVEL_ARG = re.compile(r"^(?:level[_-]?)?(\d+)$", re.IGNORECASE)
# KernelBench's published timings, beside its level folders: {"level1": {"19_ReLU.py": {"mean":
# ms, "hardware": ...}}}.  Eager PyTorch and torch.compile (inductor, default mode).
BASELINE_DIR = "baseline_H100_Modal"
BASELINE_FILES = {"eager": "baseline_time_torch.json",
                  "compiled": "baseline_time_torch_compile_inductor_default.json"}


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
    if only:  # a,b or repeated; in the order named (a time-limited run reaches the first ones first)
        rank: dict[str, int] = {}  # a name's first mention
        for n in (n.strip() for item in only for n in item.split(",")):
            if n:
                rank.setdefault(n, len(rank))
        specs = [s for s in specs if s.name in rank or s.path.stem in rank]
        specs.sort(key=lambda s: min(rank.get(s.name, len(rank)), rank.get(s.path.stem, len(rank))))
    if not specs:
        raise BenchError(f"no problems (*.py files) to run in {directory}"
                         + (f" matching --only {' '.join(only)}" if only else ""))
    return specs


def published_baselines(specs: list[ProblemSpec]) -> dict[str, dict[str, Any]]:
    """problem name -> {"eager_ms", "compiled_ms", "hardware"} for problems inside a KernelBench
    tree (a `baseline_H100_Modal/` folder beside their level folder); others are left out."""
    tables: dict[Path, dict[str, Any]] = {}
    found: dict[str, dict[str, Any]] = {}
    for spec in specs:
        level_dir = spec.path.parent
        folder = level_dir.parent / BASELINE_DIR
        if folder not in tables:
            tables[folder] = {}
            for kind, name in BASELINE_FILES.items():
                try:
                    tables[folder][kind] = json.loads((folder / name).read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    pass
        row: dict[str, Any] = {}
        for kind, table in tables[folder].items():
            entry = (table.get(level_dir.name) or {}).get(spec.path.name)
            if isinstance(entry, dict) and isinstance(entry.get("mean"), (int, float)):
                row[f"{kind}_ms"] = float(entry["mean"])
                row["hardware"] = entry.get("hardware")
        if row:
            found[spec.name] = row
    return found
