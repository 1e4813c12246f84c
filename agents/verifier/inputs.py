"""Inputs of a check case, regenerated identically in every process from (seed, shapes).

A case is the problem's `get_inputs()` called right after `torch.manual_seed(seed)` (CPU
generator: identical across processes of the same torch build), optionally resized to a shape
variant.  Resizing keeps each tensor's values (so index tensors stay in range): truncating the
flattened tensor, or extending it with its reversed copy.
"""

from __future__ import annotations

import copy
import time
from collections import OrderedDict
from typing import Any

import torch

from kernelstitch.core.problem import LoadedProblem


def seeded_inputs(problem: LoadedProblem, seed: int) -> list[Any]:
    torch.manual_seed(seed)
    return problem.inputs()


def input_shapes(values: list[Any]) -> list[list[int] | None]:
    return [list(v.shape) if isinstance(v, torch.Tensor) else None for v in values]


def _resized(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    numel = 1
    for d in shape:
        numel *= d
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        return torch.zeros(shape, dtype=tensor.dtype)
    while flat.numel() < numel:
        flat = torch.cat([flat, flat.flip(0)])
    return flat[:numel].reshape(shape).clone()


def _generate(problem: LoadedProblem, seed: int) -> list[Any]:
    return [v.cpu() if isinstance(v, torch.Tensor) else v for v in seeded_inputs(problem, seed)]


def _resize_all(values: list[Any], shapes: list[list[int] | None]) -> list[Any]:
    return [_resized(v, s) if isinstance(v, torch.Tensor) and s is not None
            and list(v.shape) != list(s) else v for v, s in zip(values, shapes)]


class CaseInputCache:
    """A case's CPU inputs, generated once per process.

    `get_inputs()` of a 1 GiB problem costs seconds of CPU random-number generation, and one
    verification asks for the same case up to four times (check, timing set, profile, re-check).
    Cached tensors stay private to the verifier: callers get a new list (non-tensor values
    deep-copied), and `to_device` copies tensors before model code sees them.  Bounded by bytes;
    `generate_s` is the time spent generating, for the verdict's timing breakdown."""

    def __init__(self, max_bytes: int = 8 << 30) -> None:
        self.max_bytes = max_bytes
        self.generate_s = 0.0
        # key -> (values, bytes, problem): the problem is kept so its id() is not reused
        self._entries: OrderedDict[tuple, tuple[list[Any], int, Any]] = OrderedDict()
        self._bytes = 0

    def get(self, problem: LoadedProblem, seed: int,
            shapes: list[list[int] | None] | None = None) -> list[Any]:
        key = (id(problem), seed, _shape_key(shapes))
        entry = self._entries.get(key)
        if entry is None:
            if shapes is None:
                start = time.perf_counter()
                values = _generate(problem, seed)
                self.generate_s += time.perf_counter() - start
            else:  # a variant resizes its seed's own inputs (generated once, cached)
                values = _resize_all(self.get(problem, seed), shapes)
            entry = (values, total_bytes(values), problem)
            self._entries[key] = entry
            self._bytes += entry[1]
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                _, (_, size, _) = self._entries.popitem(last=False)
                self._bytes -= size
        else:
            self._entries.move_to_end(key)
        return [v if isinstance(v, torch.Tensor) else copy.deepcopy(v) for v in entry[0]]


def _shape_key(shapes: list[list[int] | None] | None) -> tuple | None:
    return None if shapes is None else tuple(None if s is None else tuple(s) for s in shapes)


_CACHE = CaseInputCache()


def case_inputs(problem: LoadedProblem, seed: int,
                shapes: list[list[int] | None] | None = None) -> list[Any]:
    """CPU inputs of a case; `shapes` None means the problem's own shapes."""
    return _CACHE.get(problem, seed, shapes)


def input_generation_seconds() -> float:
    return _CACHE.generate_s


def to_device(values: list[Any], device: torch.device) -> list[Any]:
    """Fresh device copies (never the cached CPU tensors themselves)."""
    return [v.to(device, copy=True) if isinstance(v, torch.Tensor) else v for v in values]


def total_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


# --------------------------------------------------------------------------------------------
# Shape variants


def _alternatives(size: int) -> list[int]:
    """A slightly larger odd size (catches hard-coded element counts) and a smaller odd one
    (catches kernels that assume full tiles)."""
    larger = size + (3 if size % 2 == 0 else 2)
    smaller = max(size // 8, 1) | 1
    options = [larger]
    if smaller != size:
        options.append(smaller)
    return options


def _proposals(shapes: list[list[int] | None]) -> list[list[list[int] | None]]:
    """Candidate variants: change dim 0 (tied across inputs that share it), then the last dim."""
    first = next((s for s in shapes if s), None)
    if not first:
        return []
    proposals = []
    for position in (0, -1):
        size = first[position]
        for new in _alternatives(size):
            variant = []
            for s in shapes:
                if s and s[position] == size:
                    s = list(s)
                    s[position] = new
                variant.append(s)
            proposals.append(variant)
    return proposals


def _accepted_on_meta(problem: LoadedProblem, shapes: list[list[int] | None],
                      base: list[Any]) -> bool | None:
    """True/False: the reference accepts/rejects these shapes; None: meta could not tell."""
    try:
        with torch.device("meta"):
            model = problem.build()
    except Exception:
        return None
    args = [torch.empty(s, dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor)
            and s is not None else v for v, s in zip(base, shapes)]
    try:
        with torch.no_grad():
            model(*args)
    except NotImplementedError:
        return None
    except Exception:
        return False
    return True


def shape_variants(problem: LoadedProblem, base: list[Any], count: int,
                   run_on_device) -> tuple[list[list[list[int] | None]], list[str]]:
    """Up to `count` input-shape variants the reference accepts; `run_on_device(shapes)` is
    the fallback judge (runs the reference for real) when meta tensors cannot decide."""
    notes: list[str] = []
    chosen: list[list[list[int] | None]] = []
    original = input_shapes(base)
    for proposal in _proposals(original):
        if len(chosen) >= count:
            break
        if proposal == original or proposal in chosen:
            continue
        accepted = _accepted_on_meta(problem, proposal, base)
        if accepted is None:
            accepted = run_on_device(proposal)
        if accepted:
            chosen.append(proposal)
    if count and not chosen:
        notes.append("no other input shape is accepted by the reference: checked the "
                     "problem's shapes only")
    return chosen, notes
