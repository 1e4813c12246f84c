"""Inputs of a check case, generated on the GPU, identically in every process, from (seed, shapes).

A case is the problem's `get_inputs()` called right after `torch.manual_seed(seed)` with the
case's device as torch's default device, so `torch.randn(...)` draws from that GPU's Philox
generator: the same values in every worker on the same device and torch build (the judge
checks this per case through `digest`), and a 6.4 GB input costs milliseconds instead of the
seconds of CPU generation plus a host-to-device copy.  Tensors that `get_inputs()` makes on
the CPU explicitly are moved to the device.  Nothing is cached: each call is a fresh
generation, so model code never sees a tensor another call saw.

A shape variant resizes its seed's own inputs (keeping values, so index tensors stay in range):
truncating the flattened tensor, or extending it with its reversed copy.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelstitch.core.problem import LoadedProblem

_SECONDS = [0.0]  # time spent generating in this process, for the verdict's breakdown


def seeded_inputs(problem: LoadedProblem, seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
    with torch.device(device):
        values = problem.inputs()
    return [v.to(device) if isinstance(v, torch.Tensor) and v.device != device else v
            for v in values]


def input_shapes(values: list[Any]) -> list[list[int] | None]:
    return [list(v.shape) if isinstance(v, torch.Tensor) else None for v in values]


def _resized(tensor: torch.Tensor, shape: list[int]) -> torch.Tensor:
    """The flattened tensor, then its reversed copy, then the tensor again... cut to `shape`:
    one allocation of the new size (doubling by concatenation took twice a multi-GB input)."""
    numel = 1
    for d in shape:
        numel *= d
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        return torch.zeros(shape, dtype=tensor.dtype, device=tensor.device)
    out = torch.empty(numel, dtype=tensor.dtype, device=tensor.device)
    position, forward = 0, True
    while position < numel:
        take = min(flat.numel(), numel - position)
        out[position:position + take] = flat[:take] if forward else flat[-take:].flip(0)
        position += take
        forward = not forward
    return out.reshape(shape)


def _resize_all(values: list[Any], shapes: list[list[int] | None]) -> list[Any]:
    return [_resized(v, s) if isinstance(v, torch.Tensor) and s is not None
            and list(v.shape) != list(s) else v for v, s in zip(values, shapes)]


# A wide-range case (reduced precision only): every floating input's elements multiplied by
# 10^-u, u uniform in [0, WIDE_DECADES], so values of very different magnitudes meet in one sum,
# where 8- and 10-bit mantissas lose the small ones.  Signs are kept and no value grows: inputs
# that must lie in a range (probabilities in [0, 1], a positive scale) stay in it, so the
# reference cannot hit a device-side assert on them.
WIDE_DECADES = 3.0


def _widened(values: list[Any], seed: int) -> list[Any]:
    out = []
    for k, v in enumerate(values):
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.numel():
            generator = torch.Generator(device=v.device).manual_seed(seed * 1000003 + k)
            u = torch.rand(v.shape, generator=generator, device=v.device, dtype=torch.float32)
            v = v * torch.pow(10.0, -u * WIDE_DECADES).to(v.dtype)
        out.append(v)
    return out


def case_inputs(problem: LoadedProblem, seed: int, shapes: list[list[int] | None] | None,
                device: torch.device, wide: bool = False) -> list[Any]:
    """Fresh device inputs of a case; `shapes` None means the problem's own shapes; `wide`:
    the wide-range case's inputs (see WIDE_DECADES)."""
    start = time.perf_counter()
    values = seeded_inputs(problem, seed, device)
    if shapes is not None:
        values = _resize_all(values, shapes)
    if wide:
        values = _widened(values, seed)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    _SECONDS[0] += time.perf_counter() - start
    return values


def input_generation_seconds() -> float:
    return _SECONDS[0]


def total_bytes(values: list[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


DIGEST_SLICE_WORDS = 1 << 26


def digest(values: list[Any]) -> list[Any]:
    """A cheap fingerprint of a case's inputs (shape, dtype and the int64 sum of each tensor's
    32-bit words, on the device): two processes that generated different values for the same
    case disagree here with overwhelming probability.  Not a defence against forgery: it only
    tells a harness mismatch from a wrong candidate."""
    out: list[Any] = []
    for v in values:
        if not isinstance(v, torch.Tensor):
            out.append(repr(v)[:200])
            continue
        raw = v.detach().contiguous().reshape(-1).view(torch.uint8)
        words = raw[:raw.numel() // 4 * 4].view(torch.int32)
        total = torch.zeros((), dtype=torch.int64, device=v.device)
        for start in range(0, words.numel(), DIGEST_SLICE_WORDS):
            total += words[start:start + DIGEST_SLICE_WORDS].sum(dtype=torch.int64)
        tail = raw[words.numel() * 4:].to(torch.int64).sum()
        out.append([list(v.shape), str(v.dtype), int(total + tail)])
    return out


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


def shape_variants(problem: LoadedProblem, base: list[Any], count: int, run_on_device,
                   fits=lambda _shapes: True) -> tuple[list[list[list[int] | None]], list[str]]:
    """Up to `count` input-shape variants the reference accepts and the memory plan can hold
    (`fits(shapes)`); `run_on_device(shapes)` is the fallback judge (runs the reference for
    real) when meta tensors cannot decide."""
    notes: list[str] = []
    chosen: list[list[list[int] | None]] = []
    too_big = 0
    original = input_shapes(base)
    for proposal in _proposals(original):
        if len(chosen) >= count:
            break
        if proposal == original or proposal in chosen:
            continue
        if not fits(proposal):
            too_big += 1
            continue
        accepted = _accepted_on_meta(problem, proposal, base)
        if accepted is None:
            accepted = run_on_device(proposal)
        if accepted:
            chosen.append(proposal)
    if too_big:
        notes.append(f"{too_big} larger input shape(s) left out: they do not fit in GPU memory "
                     "beside the checks (memory plan)")
    if count and not chosen:
        notes.append("no other input shape is accepted by the reference: checked the "
                     "problem's shapes only")
    return chosen, notes
