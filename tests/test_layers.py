"""The import rules of ARCHITECTURE.md, checked on the source: cli -> server -> agents ->
profiler -> core, never the reverse; the server and core never import torch at module level
outside the worker-side modules named below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {  # folder -> its package
    "kernelstitch/core": "kernelstitch.core",
    "profiler": "kernelstitch.profiler",
    "agents": "kernelstitch.agents",
    "server": "kernelstitch.server",
}
ORDER = ["kernelstitch.core", "kernelstitch.profiler", "kernelstitch.agents", "kernelstitch.server"]


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
    return found


def _layer_of(module: str) -> str | None:
    for package in ORDER:
        if module == package or module.startswith(package + "."):
            return package
    return None


def _files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "node_modules" not in p.parts)


@pytest.mark.parametrize("folder", list(LAYERS))
def test_no_upward_imports(folder):
    own = ORDER.index(LAYERS[folder])
    violations = []
    for path in _files(folder):
        for module, line in _imports(path):
            layer = _layer_of(module)
            if layer is not None and ORDER.index(layer) > own:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            if module == "kernelstitch.cli" or module.startswith("kernelstitch.cli."):
                violations.append(f"{path.relative_to(ROOT)}:{line} imports the CLI")
    assert not violations, "\n".join(violations)


def test_server_never_imports_torch():
    """The server starts fast and runs no user code: torch only ever loads in job/worker processes."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _files("server")
        for module, line in _imports(path)
        if module == "torch" or module.startswith("torch.")
    ]
    assert not offenders, offenders


def test_the_check_sees_real_imports():
    """Guard against a vacuous pass: the scanner finds the server's import of the job protocol."""
    modules = {m for path in _files("server") for m, _ in _imports(path)}
    assert "kernelstitch.agents.job_protocol" in modules
