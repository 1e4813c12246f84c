"""`scan_source` for text that changes a little at a time (an editor's buffer): the file is cut
into runs of top-level statements at lines that start a top-level `class`, `def` or decorator,
each run is parsed on its own and its summary cached by its text, so an edit re-parses only the
run it touched (typing into a 5,000-line file parsed all of it on every request: issue 25).

Exactness: a run that parses on its own ends outside any bracket or string, so the runs' statements
are the file's statements and the merged summary is the whole file's.  Where a run does not parse
(a cut inside a string, a half-typed line), the text from that run to the end is parsed as one:
everything before it is complete statements, so the tokenizer starts there as it would in the whole
file, and that parse's summary or error (lines shifted) is the file's."""

from __future__ import annotations

import ast
import re
import threading
from collections import OrderedDict

from kernelstitch.core.problem import (
    SourceScan,
    TreeSummary,
    merge_summaries,
    replace_lone_surrogates,
    scan_of_summary,
    scan_source,
    summarise_tree,
)

_STARTS_RUN = re.compile(r"(?:class |def |async def |@)")
_LINE_REF = re.compile(r"(\bline )(\d+)")
MAX_CACHED_RUNS = 4096


def split_runs(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line indexes of each run; a definition right after a decorator stays with it."""
    starts = [0]
    for i, line in enumerate(lines):
        # The first-character test keeps the regex off almost every line (typing latency).
        if i and line[:1] in "cda@" and _STARTS_RUN.match(line) and not lines[i - 1].startswith("@"):
            starts.append(i)
    bounds = starts + [len(lines)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class IncrementalScanner:
    """One per document; `scan(text)` equals `scan_source(text)`.  Thread-safe (the server scans
    in a worker thread and, for a request that cannot wait, on its event loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[str, SourceScan] | None = None
        # run text -> (summary or None when it does not parse, {first line: shifted summary})
        self._runs: OrderedDict[str, tuple[TreeSummary | None, dict[int, TreeSummary]]] = OrderedDict()
        self.parsed_runs = 0  # runs parsed since creation (the benchmark and tests read it)

    def scan(self, text: str) -> SourceScan:
        with self._lock:
            if self._last is not None and self._last[0] == text:  # the thread and a request on one text
                return self._last[1]
            scan = self._scan(text)
            self._last = (text, scan)
            return scan

    def _scan(self, text: str) -> SourceScan:
        text = replace_lone_surrogates(text)
        lines = text.split("\n")
        parts: list[TreeSummary] = []
        for first, end in split_runs(lines):
            summary = self._summary("\n".join(lines[first:end]), first)
            if summary is None:  # the rest of the file as one run: its summary or its error
                rest = "\n".join(lines[first:])
                summary = self._summary(rest, first)
                if summary is None:
                    rest_scan = scan_source(rest)
                    return _shifted_error(rest_scan, first) if rest_scan.error else scan_source(text)
                parts.append(summary)
                break
            parts.append(summary)
        try:
            return scan_of_summary(merge_summaries(parts))
        except RecursionError:
            return scan_source(text)

    def _summary(self, run: str, first: int) -> TreeSummary | None:
        """The run's summary with lines shifted to start at `first` (both cached)."""
        entry = self._runs.get(run)
        if entry is None:
            self.parsed_runs += 1
            try:
                summary: TreeSummary | None = summarise_tree(ast.parse(run))
            except (SyntaxError, ValueError, UnicodeEncodeError, MemoryError, RecursionError):
                summary = None
            entry = self._runs[run] = (summary, {})
            if len(self._runs) > MAX_CACHED_RUNS:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(run)
        summary, shifted = entry
        if summary is None:
            return None
        if first not in shifted:
            if len(shifted) > 8:  # lines move as the user types above: keep a few positions
                shifted.clear()
            shifted[first] = summary.shifted(first)
        return shifted[first]


def _shifted_error(scan: SourceScan, by: int) -> SourceScan:
    error = scan.error
    assert error is not None
    # Python names other lines in some messages ("... after function definition on line 2").
    message = _LINE_REF.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + by}", error.message)
    return SourceScan(error=type(error)(message=message, line=error.line + by, column=error.column))
