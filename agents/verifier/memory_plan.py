"""How much of the GPU one verification may use, decided once from the problem's sizes.

Two processes share the device during the candidate's checks: the candidate worker (its model,
the case's inputs, its outputs, a fresh copy of the inputs to spot in-place changes, a copy of
the outputs for the late-write check, and blocks of poisoned memory for fresh outputs to land
in) and the judge (the reference model, the regenerated inputs, the reference outputs and the
comparison's slices).  The plan is what fits beside each other in the free memory the
reference worker saw: how many poisoned blocks per output size, whether the late-write check
copies whole outputs, how many input sets the timing may rotate through.  What cannot fit even
at the minimum is `too_large`, with the numbers, before any candidate runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

GiB = 1 << 30
CONTEXT_BYTES = 768 << 20  # the candidate process's CUDA context, cuBLAS/cuDNN workspaces
HEADROOM_FRACTION = 0.92  # of the free memory: fragmentation, library workspaces
SLACK_BYTES = 512 << 20  # comparison slices, small temporaries
MAX_POISON_BLOCKS = 4
MAX_ROTATED_SETS = 3
TAIL_SNAPSHOT_BYTES = 16 << 10  # the late-write check's tail copy when whole copies do not fit


@dataclass(frozen=True)
class MemoryPlan:
    free_bytes: int  # what the reference worker saw free, its own context already counted
    param_bytes: int  # the reference model's parameters and buffers
    input_bytes: int  # one case's inputs
    output_bytes: int  # one case's outputs
    needed_bytes: int  # the least this verification needs at once
    fits: bool
    poison_blocks: int = 1  # poisoned blocks per output size before each checked call
    # All poisoned blocks together (outputs' sizes first, then the inputs', for temporaries).
    poison_budget_bytes: int = 0
    full_snapshot: bool = True  # the late-write check copies whole outputs (else their tails)
    rotated_sets: int = 1  # timing input sets
    # A reduced precision: the judge keeps a float64 copy of the model from its first comparison
    # on (twice the parameters, resident beside everything after) and computes float64 outputs.
    judge_float64: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MemoryPlan:
        return cls(**data)

    def summary(self) -> str:
        return (f"memory plan: inputs {_gb(self.input_bytes)}, outputs {_gb(self.output_bytes)}, "
                f"parameters {_gb(self.param_bytes)} per process; {_gb(self.free_bytes)} free; "
                f"{self.poison_blocks} poisoned block(s) per output size, "
                f"{'whole-output' if self.full_snapshot else 'tail-only'} late-write copies, "
                f"up to {self.rotated_sets} timing input set(s)")

    def too_large_message(self) -> str:
        return (f"too large to verify on this GPU: one check needs at least "
                f"{_gb(self.needed_bytes)} at once (inputs {_gb(self.input_bytes)} and outputs "
                f"{_gb(self.output_bytes)} in both the candidate's and the judge's process, "
                f"parameters {_gb(self.param_bytes)} each, a copy of the inputs), but "
                f"{_gb(self.free_bytes)} is free")


def _gb(n: int) -> str:
    return f"{n / GiB:.2f} GiB" if n >= (GiB // 100) else f"{n / (1 << 20):.1f} MiB"


def _judge_resident(params: int, judge_float64: bool) -> int:
    """What the judge holds for the whole verification besides its model: the float64 copy."""
    return 2 * params if judge_float64 else 0


def _needed(params: int, inputs: int, outputs: int, poison_blocks: int,
            full_snapshot: bool, judge_float64: bool = False) -> int:
    snapshot = outputs if full_snapshot else 0
    # Making a shape variant's inputs holds the seed's own inputs beside the resized ones.
    making_inputs = 2 * inputs
    # The candidate's own peak: its inputs, outputs (in a poisoned block), the other poisoned
    # blocks and the late-write copy during the call; or, after the cache is emptied, a fresh
    # copy of the inputs (made like the first) for the in-place check.
    candidate_holds = params + inputs + outputs
    candidate_peak = max(params + making_inputs,
                         candidate_holds + (poison_blocks - 1) * outputs + snapshot,
                         candidate_holds + making_inputs) + _judge_resident(params, judge_float64)
    # While the judge compares: the candidate holds its inputs and outputs; the judge its
    # model, the regenerated inputs, the reference outputs and, for a non-contiguous candidate
    # output, a contiguous copy of it.
    judge_peak = candidate_holds + params + max(making_inputs, inputs + 2 * outputs)
    if judge_float64:  # the float64 copy, its float64 outputs and their rounded copy
        judge_peak += _judge_resident(params, True) + 3 * outputs
    return max(candidate_peak, judge_peak) + CONTEXT_BYTES + SLACK_BYTES


def plan_memory(free_bytes: int, param_bytes: int, input_bytes: int,
                output_bytes: int, judge_float64: bool = False) -> MemoryPlan:
    """The most generous plan that fits `free_bytes`; `fits` False when even the least does.
    `judge_float64`: the judge compares with a float64 recomputation (a reduced precision)."""
    usable = int(free_bytes * HEADROOM_FRACTION)

    def needed(blocks: int, full: bool) -> int:
        return _needed(param_bytes, input_bytes, output_bytes, blocks, full, judge_float64)

    least = needed(1, False)
    base = dict(free_bytes=free_bytes, param_bytes=param_bytes, input_bytes=input_bytes,
                output_bytes=output_bytes, judge_float64=judge_float64)
    if least > usable:
        return MemoryPlan(**base, needed_bytes=least, fits=False)
    full = needed(1, True) <= usable
    blocks = 1
    while blocks < MAX_POISON_BLOCKS and needed(blocks + 1, full) <= usable:
        blocks += 1
    holds = needed(blocks, full)
    resident = _judge_resident(param_bytes, judge_float64)
    # Poisoning happens before the call, with the case's inputs alone allocated.
    budget = usable - (param_bytes + input_bytes + CONTEXT_BYTES + SLACK_BYTES + resident)
    # Timing runs without the judge comparing: each extra rotated set is one more copy of the
    # inputs.
    spare = usable - (param_bytes + input_bytes + output_bytes + CONTEXT_BYTES + SLACK_BYTES
                      + resident)
    sets = 1 + max(0, min(MAX_ROTATED_SETS - 1, spare // max(input_bytes, 1) // 2))
    return MemoryPlan(**base, needed_bytes=holds, fits=True, poison_blocks=blocks,
                      poison_budget_bytes=max(budget, output_bytes), full_snapshot=full,
                      rotated_sets=int(sets))


def fits_scaled(plan: MemoryPlan, factor: float) -> bool:
    """Whether a case whose inputs and outputs are `factor` times this plan's still fits at
    the least (shape variants are a little larger than the problem's own shapes)."""
    scaled = _needed(plan.param_bytes, int(plan.input_bytes * factor),
                     int(plan.output_bytes * factor), 1, False, plan.judge_float64)
    return scaled <= int(plan.free_bytes * HEADROOM_FRACTION)
