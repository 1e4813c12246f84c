"""Compiler diagnostics of `load_inline` builds, mapped back to the candidate's .py lines.

`load_inline` writes the embedded source strings to `main.cpp` / `cuda.cu` in its build folder
(after a few implicit `#include` lines) and raises `RuntimeError("Error building extension
...: <compiler output>")`.  nvcc reports `FILE(LINE): error: ...`, gcc/clang `FILE:LINE:COL:
error: ...`.  Each diagnostic's generated line is mapped to the line of the Python string literal
it came from: exactly when the generated file can be read (the literal's text is located inside
it), else by matching the offending line's text.  Torch-free.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_NVCC = re.compile(r"^(?P<file>[^\s:()][^():]*?)\((?P<line>\d+)\): (?P<sev>error|warning)"
                   r"(?: #\d+-D)?: (?P<msg>.*)$")
_GCC = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)? "
                  r"(?P<sev>error|fatal error|warning): (?P<msg>.*)$")
MAX_DIAGNOSTICS = 20


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # error | warning
    message: str
    generated_file: str
    generated_line: int
    line: int | None  # line in the candidate .py, when it could be mapped

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_compiler_output(text: str) -> list[tuple[str, int, str, str]]:
    """(file, line, severity, message) for each error/warning line of nvcc or gcc output."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        match = _NVCC.match(line) or _GCC.match(line)
        if not match:
            continue
        severity = "error" if "error" in match.group("sev") else "warning"
        found.append((match.group("file"), int(match.group("line")), severity,
                      match.group("msg").strip()))
    return found


def _string_literals(py_source: str) -> list[tuple[int, str]]:
    """(first line, text) of every str literal in the candidate (where source strings live)."""
    try:
        tree = ast.parse(py_source)
    except SyntaxError:
        return []
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and "\n" in n.value]


def map_generated_line(generated_text: str | None, generated_line: int, py_source: str) -> (
        int | None):
    """The candidate line of `generated_line` of a file load_inline generated from a literal."""
    literals = _string_literals(py_source)
    if generated_text is not None:
        gen_lines = generated_text.splitlines()
        for lineno, text in literals:
            offset = generated_text.find(text)
            if offset < 0:
                stripped = text.strip("\n")
                offset = generated_text.find(stripped)
                if offset < 0 or not stripped:
                    continue
                lead = len(text) - len(text.lstrip("\n"))
                start_line = generated_text.count("\n", 0, offset) + 1 - lead
            else:
                start_line = generated_text.count("\n", 0, offset) + 1
            end_line = start_line + text.count("\n")
            if start_line <= generated_line <= end_line:
                return lineno + (generated_line - start_line)
        if 0 < generated_line <= len(gen_lines):
            return _match_line_text(gen_lines[generated_line - 1], literals)
    return None


def _match_line_text(code_line: str, literals: list[tuple[int, str]]) -> int | None:
    wanted = code_line.strip()
    if not wanted:
        return None
    hits = []
    for lineno, text in literals:
        for k, line in enumerate(text.split("\n")):
            if line.strip() == wanted:
                hits.append(lineno + k)
    return hits[0] if len(hits) == 1 else None


def map_diagnostics(compiler_output: str, py_source: str,
                    generated: dict[str, str] | None = None) -> list[Diagnostic]:
    """Diagnostics of a failed build; `generated` maps file paths to their text when readable.

    Files not in `generated` are read from disk when they exist (the worker process that ran
    the build can read its build folder).
    """
    generated = dict(generated or {})
    result = []
    for file, gen_line, severity, message in parse_compiler_output(compiler_output):
        text = generated.get(file)
        if text is None:
            try:
                text = Path(file).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = None
            generated[file] = text  # type: ignore[assignment]
        result.append(Diagnostic(severity, message, file, gen_line,
                                 map_generated_line(text, gen_line, py_source)))
        if len(result) >= MAX_DIAGNOSTICS:
            break
    return result
