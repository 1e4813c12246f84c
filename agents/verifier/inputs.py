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


# A large-logits case (softmax and attention, stress_cases.py): every floating input multiplied
# by this.  The largest of a million N(0, 1) draws, about 5, becomes 160: exp() of it overflows
# fp32 (above 88.7) unless the row's maximum is subtracted first; logits from products of two
# inputs (attention) grow by its square, so an online softmax rescales by large steps between
# key tiles.
LARGE_INPUT_SCALE = 32.0


def _scaled(values: list[Any], factor: float) -> list[Any]:
    return [v * factor if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for v in values]


# A masked-rows case (boolean mask inputs of softmax and attention problems): in every bool
# input of two or more dimensions, every MASKED_ROW_PERIOD-th row along the last dimension is
# all False and the row after it all True, so whichever of the two means "masked" (masked_fill
# with the mask, or with its negation; SDPA's attn_mask keeps True), some rows are masked whole.
MASKED_ROW_PERIOD = 7


def is_bool_mask(value: Any) -> bool:
    """A bool tensor of 2 or more dims: what the masked-rows and long-sequence cases treat as a
    mask."""
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.dim() >= 2


def _rows_masked(values: list[Any]) -> list[Any]:
    out = []
    for v in values:
        if is_bool_mask(v) and v.numel():
            rows = v.reshape(-1, v.shape[-1]).clone()
            rows[0::MASKED_ROW_PERIOD] = False
            rows[1::MASKED_ROW_PERIOD] = True
            v = rows.reshape(v.shape)
        out.append(v)
    return out


# The input transforms a case may name ("transform" in the case): see the comments above.
TRANSFORMS = ("wide", "large_logits", "masked_rows")


def case_inputs(problem: LoadedProblem, seed: int, shapes: list[list[int] | None] | None,
                device: torch.device, transform: str | None = None) -> list[Any]:
    """Fresh device inputs of a case; `shapes` None means the problem's own shapes; `transform`
    one of TRANSFORMS (the wide-range, large-logits or masked-rows case's inputs) or None."""
    if transform is not None and transform not in TRANSFORMS:
        raise ValueError(f"unknown case transform {transform!r}")
    start = time.perf_counter()
    values = seeded_inputs(problem, seed, device)
    if shapes is not None:
        values = _resize_all(values, shapes)
    if transform == "wide":
        values = _widened(values, seed)
    elif transform == "large_logits":
        values = _scaled(values, LARGE_INPUT_SCALE)
    elif transform == "masked_rows":
        values = _rows_masked(values)
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


def long_sequence_length(length: int) -> int:
    """The long-sequence case's length for a sequence of `length`: four times it, at least
    twice and at most 2048 unless twice is more, plus 3 (no tile of 16, 32 or 64 divides it)."""
    return min(4 * length, max(2 * length, 2048)) + 3


def long_sequence_shapes(shapes: list[list[int] | None],
                         masks: list[bool] | None = None) -> list[list[int] | None] | None:
    """The shapes with dim -2 (the sequence of (B, T, C) and (B, H, T, D) operands) of every
    tensor of 3 or more dims that shares the first such tensor's length made long, and both
    trailing dims of the [.., T, T] inputs `masks` marks (bool masks: a float [.., T, T] may be
    a value whose last dim is a head dim); None when no input has 3 dims."""
    first = next((s for s in shapes if s and len(s) >= 3), None)
    if first is None:
        return None
    length = first[-2]
    longer = long_sequence_length(length)
    masks = masks or [False] * len(shapes)

    def grown(s: list[int] | None, mask: bool) -> list[int] | None:
        if not s or len(s) < 2 or s[-2] != length:
            return s
        if mask and s[-1] == length:
            return s[:-2] + [longer, longer]
        return s[:-2] + [longer, s[-1]] if len(s) >= 3 else s

    return [grown(s, m) for s, m in zip(shapes, masks)]


def shape_variants(problem: LoadedProblem, base: list[Any], count: int, run_on_device,
                   fits=lambda _shapes: True, long_sequence: bool = False, long_fits=None,
                   ) -> tuple[list[list[list[int] | None]], list[str]]:
    """Up to `count` input-shape variants the reference accepts and the memory plan can hold
    (`fits(shapes)`); `run_on_device(shapes)` is the fallback judge (runs the reference for
    real) when meta tensors cannot decide.  `long_sequence` (attention problems,
    stress_cases.py) adds one more unless `count` is 0: the sequences made long
    (long_sequence_shapes), if `long_fits` (default `fits`) says it fits: attention's scores
    grow with the square of the length."""
    notes: list[str] = []
    chosen: list[list[list[int] | None]] = []
    too_big = 0
    original = input_shapes(base)

    def accepted(proposal) -> bool:
        verdict = _accepted_on_meta(problem, proposal, base)
        return run_on_device(proposal) if verdict is None else verdict

    for proposal in _proposals(original):
        if len(chosen) >= count:
            break
        if proposal == original or proposal in chosen:
            continue
        if not fits(proposal):
            too_big += 1
            continue
        if accepted(proposal):
            chosen.append(proposal)
    if too_big:
        notes.append(f"{too_big} larger input shape(s) left out: they do not fit in GPU memory "
                     "beside the checks (memory plan)")
    if count and not chosen:
        notes.append("no other input shape is accepted by the reference: checked the "
                     "problem's shapes only")
    if long_sequence and count:
        masks = [is_bool_mask(v) for v in base]
        notes.append(_long_sequence_variant(original, masks, chosen, long_fits or fits, accepted))
    return chosen, notes


def _long_sequence_variant(original, masks, chosen, fits, accepted) -> str:
    """Appends the long-sequence variant to `chosen` when the reference takes it; the note."""
    proposal = long_sequence_shapes(original, masks)
    if proposal is None:
        return "no long-sequence case: no input has a sequence dimension (3 or more dims)"
    first = next(s for s in original if s and len(s) >= 3)
    what = f"sequence length {first[-2]} -> {long_sequence_length(first[-2])}"
    if not fits(proposal):
        return f"no long-sequence case ({what}): it does not fit in GPU memory beside the checks"
    if not accepted(proposal):
        return f"no long-sequence case ({what}): the reference does not accept those shapes"
    chosen.append(proposal)
    return f"long-sequence case: {what} (dim -2 of the inputs)"
