"""Diagnostics: profiler findings on the lines that caused them, verification failures on the
generated file, and a gentle hint on modules without example inputs.

Syntax errors are left to the user's Python tooling: reporting them too would only duplicate.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelstitch.server.discovery import DocumentScan
from kernelstitch.server.results import (
    ModuleResults,
    verdict_reasons,
    verdict_status,
)
from lsprotocol import types as lsp

from kernelstitch.core.problem import CANDIDATE_CLASS

SOURCE = "kernelstitch"
NO_INPUTS_CODE = "no-example-inputs"

_SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "info": lsp.DiagnosticSeverity.Information,
    "information": lsp.DiagnosticSeverity.Information,
    "hint": lsp.DiagnosticSeverity.Hint,
}


def line_range(lines: Sequence[str], line: int | None) -> lsp.Range:
    """The non-blank extent of 1-based `line` (line 1 when unknown or out of range)."""
    index = (line or 1) - 1
    if not 0 <= index < len(lines):
        index = 0 if index < 0 or not lines else len(lines) - 1
    text = lines[index] if lines else ""
    start = len(text) - len(text.lstrip())
    return lsp.Range(lsp.Position(index, _utf16(text[:start])),
                     lsp.Position(index, _utf16(text)))


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def missing_inputs(doc: DocumentScan) -> list[lsp.Diagnostic]:
    out = []
    for info in doc.scan.modules:
        if info.has_inputs or info.name == CANDIDATE_CLASS:
            continue
        index = info.line - 1
        out.append(lsp.Diagnostic(
            range=lsp.Range(lsp.Position(index, info.name_column),
                            lsp.Position(index, info.name_column + len(info.name))),
            message=(f"{info.name} has no example inputs, so KernelStitch cannot trace or time "
                     "it. The 'Add example inputs' action writes a scaffold."),
            severity=lsp.DiagnosticSeverity.Information,
            source=SOURCE,
            code=NO_INPUTS_CODE,
            data={"module": info.name},
        ))
    return out


def findings(doc: DocumentScan, results: Sequence[ModuleResults]) -> list[lsp.Diagnostic]:
    """Findings of runs measured on the module text the document holds now."""
    out = []
    for entry in results:
        info = doc.module(entry.module)
        if info is None or (entry.fingerprint is not None
                            and entry.fingerprint != doc.fingerprint(info)):
            continue
        for finding in entry.findings:
            message = finding.message
            if finding.suggestion:
                message += f"\nSuggestion: {finding.suggestion}"
            out.append(lsp.Diagnostic(
                range=line_range(doc.lines, finding.line or info.line),
                message=message,
                severity=_SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Information),
                source=SOURCE,
                code=f"profile:{entry.module}",
            ))
    return out


def verification(candidate_lines: Sequence[str], entry: ModuleResults) -> list[lsp.Diagnostic]:
    """The verdict's reasons on the generated file's lines."""
    status = verdict_status(entry.verdict)
    if status not in ("rejected", "could_not_verify"):
        return []
    severity = (lsp.DiagnosticSeverity.Error if status == "rejected"
                else lsp.DiagnosticSeverity.Information)
    out = []
    for reason in verdict_reasons(entry.verdict):
        line = reason.get("line")
        out.append(lsp.Diagnostic(
            range=line_range(candidate_lines, line if isinstance(line, int) else None),
            message=str(reason.get("message") or reason.get("code") or status),
            severity=severity,
            source=SOURCE,
            code=str(reason.get("code") or status),
        ))
    return out
