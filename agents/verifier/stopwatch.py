"""Where a worker task's wall time goes, by named section (torch-free).

A verification takes a minute or more on large problems; the verdict's `stage_seconds` shows
which part (input generation, torch.compile, timing runs, profiling) so it can be made faster
without guessing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# Bound at import, before any candidate code runs: a candidate that patches time.perf_counter
# does not move these numbers.
_clock = time.perf_counter


class Stopwatch:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @staticmethod
    def now() -> float:
        return _clock()

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        start = _clock()
        try:
            yield
        finally:
            self.add_since(name, start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def add_since(self, name: str, start: float) -> None:
        self.add(name, _clock() - start)

    def to_json(self) -> dict[str, float]:
        return {name: round(value, 3) for name, value in self.seconds.items()}
