"""Which nn.Module classes each open document defines, from its text alone.

A document is re-scanned only when its text changed.  While it has a syntax error (the user is
mid-edit) the last good scan stays in use, so code actions and hovers do not flicker away.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from kernelstitch.core.incremental_scan import IncrementalScanner
from kernelstitch.core.problem import ModuleInfo, SourceScan


@dataclass(frozen=True)
class DocumentScan:
    uri: str
    version: int | None
    scan: SourceScan  # the last scan that parsed
    lines: tuple[str, ...]  # the text `scan` was made from
    has_syntax_error: bool  # the current text does not parse (scan is older than the text)
    text_hash: str

    def module(self, name: str) -> ModuleInfo | None:
        return self.scan.module(name)

    def module_at(self, line: int) -> ModuleInfo | None:
        """The module whose class body contains 1-based `line` (innermost wins: none nest)."""
        for info in self.scan.modules:
            if info.line <= line <= info.end_line:
                return info
        return None

    def fingerprint(self, info: ModuleInfo) -> str:
        """Identity of a module's text and position: results tied to lines go stale with it."""
        return module_fingerprint(self.lines, info)


def module_fingerprint(lines: tuple[str, ...] | list[str], info: ModuleInfo) -> str:
    body = "\n".join(lines[info.line - 1 : info.end_line])
    return hashlib.sha1(f"{info.line}\n{body}".encode("utf-8", "surrogatepass")).hexdigest()


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


class DocumentIndex:
    def __init__(self) -> None:
        self._docs: dict[str, DocumentScan] = {}
        self._scanners: dict[str, IncrementalScanner] = {}  # re-parse only the edited runs

    def scanner(self, uri: str) -> IncrementalScanner:
        scanner = self._scanners.get(uri)
        if scanner is None:  # not setdefault: it would build a scanner on every call
            scanner = self._scanners[uri] = IncrementalScanner()
        return scanner

    def get(self, uri: str) -> DocumentScan | None:
        return self._docs.get(uri)

    def remove(self, uri: str) -> None:
        self._docs.pop(uri, None)
        self._scanners.pop(uri, None)

    def uris(self) -> list[str]:
        return list(self._docs)

    def update(self, uri: str, text: str, version: int | None = None,
               scan: SourceScan | None = None) -> DocumentScan:
        """Scan `text` (or take `scan`, made from it elsewhere) unless it is the text already
        scanned; never raises."""
        previous = self._docs.get(uri)
        digest = _hash(text)
        if previous is not None and previous.text_hash == digest:
            if previous.version != version:
                previous = DocumentScan(uri, version, previous.scan, previous.lines,
                                        previous.has_syntax_error, digest)
                self._docs[uri] = previous
            return previous
        scan = scan if scan is not None else self.scanner(uri).scan(text)
        if scan.error is not None:
            # Keep the last good modules; their lines may be slightly off until it parses again.
            good = previous.scan if previous is not None else SourceScan()
            lines = previous.lines if previous is not None else ()
            doc = DocumentScan(uri, version, good, lines, True, digest)
        else:
            doc = DocumentScan(uri, version, scan, tuple(text.splitlines()), False, digest)
        self._docs[uri] = doc
        return doc
