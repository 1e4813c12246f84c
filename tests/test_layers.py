"""The import rules, read from ARCHITECTURE.md's table and checked on the source: every import
between KernelStitch's units is an arrow the table draws, every arrow it draws is used (so the
document stays true), and each unit imports only the third-party packages the table names."""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Repository folder -> the import package it is installed as (setup.py).
FOLDERS = {"kernelstitch": "kernelstitch", "agents": "kernelstitch.agents",
           "server": "kernelstitch.server", "profiler": "kernelstitch.profiler"}
# Module prefix -> unit, most specific first.  `kernelstitch` itself (the version string) is
# importable from everywhere and belongs to no unit.
UNITS = [
    ("kernelstitch.core", "core"),
    ("kernelstitch.profiler", "profiler"),
    ("kernelstitch.agents.plan", "agents.plan"),
    ("kernelstitch.agents.planner", "agents.planner"),
    ("kernelstitch.agents.coder", "agents.coder"),
    ("kernelstitch.agents.verifier", "agents.verifier"),
    ("kernelstitch.agents.llm", "agents.llm"),
    ("kernelstitch.agents.job_protocol", "agents.job_protocol"),
    ("kernelstitch.agents", "agents"),
    ("kernelstitch.bench", "bench"),
    ("kernelstitch.server", "server"),
    ("kernelstitch.cli", "cli"),
    ("kernelstitch.watch_cli", "cli"),
    ("kernelstitch.__main__", "cli"),
]


def unit_of(module: str) -> str | None:
    for prefix, unit in UNITS:
        if module == prefix or module.startswith(prefix + "."):
            return unit
    return None


def rules() -> dict[str, tuple[set[str], set[str]]]:
    """unit -> (units it may import, third-party packages it may import), from the table between
    the layers markers of ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("<!-- layers:begin -->", 1)[1].split("<!-- layers:end -->", 1)[0]
    found = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        names = [re.findall(r"`([^`]+)`", c) for c in cells]
        found[names[0][0]] = (set(names[1]), set(names[2]))
    return found


def _module_name(path: Path) -> str:
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        if path.is_relative_to(base):
            parts = path.relative_to(base).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            return ".".join((package, *parts))
    raise ValueError(path)


def _sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if "node_modules" not in p.parts and "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
    return found


def _edges():
    """(unit, imported unit or third-party top-level name, where) for every import."""
    internal, external = [], []
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for path in _sources():
        unit = unit_of(_module_name(path))
        where = f"{path.relative_to(ROOT)}"
        for module, line in _imports(path):
            if module == "kernelstitch" or module.startswith("kernelstitch."):
                target = unit_of(module)
                if target is not None and target != unit:
                    internal.append((unit, target, f"{where}:{line} imports {module}"))
            elif module.split(".")[0] not in stdlib:
                external.append((unit, module.split(".")[0], f"{where}:{line} imports {module}"))
    return internal, external


def test_every_unit_has_a_rule():
    table = rules()
    units = {unit for _, unit in UNITS}
    assert units <= set(table), f"ARCHITECTURE.md has no row for {sorted(units - set(table))}"
    assert set(table) <= units, f"rows for unknown units: {sorted(set(table) - units)}"
    for path in _sources():
        assert unit_of(_module_name(path)) is not None or _module_name(path) == "kernelstitch", path


def test_imports_follow_the_drawn_arrows():
    table = rules()
    internal, _ = _edges()
    violations = [why for unit, target, why in internal if target not in table[unit][0]]
    assert not violations, "imports ARCHITECTURE.md does not allow:\n" + "\n".join(violations)


def test_every_drawn_arrow_is_used():
    """An arrow in the table that no import uses is a stale document."""
    table = rules()
    internal, _ = _edges()
    used = defaultdict(set)
    for unit, target, _ in internal:
        used[unit].add(target)
    stale = [f"{unit} -> {target}" for unit, (allowed, _) in table.items()
             for target in allowed if target not in used[unit]]
    assert not stale, "arrows drawn but not used: " + ", ".join(stale)


def test_third_party_imports_are_the_ones_named():
    table = rules()
    _, external = _edges()
    violations = [why for unit, package, why in external if package not in table[unit][1]]
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("unit", ["server", "agents.plan", "agents.coder",
                                  "agents.job_protocol"])
def test_torch_free_units(unit):
    """The server starts fast and runs no user code; the plan and the coder are text in, text
    out (the language server renders plans; the coder runs without a GPU)."""
    assert "torch" not in rules()[unit][1]


def test_the_check_sees_real_imports():
    """Guard against a vacuous pass: the scanner finds the server's import of the job protocol
    and the verifier's import of torch."""
    internal, external = _edges()
    assert ("server", "agents.job_protocol") in {(u, t) for u, t, _ in internal}
    assert ("agents.verifier", "torch") in {(u, p) for u, p, _ in external}
