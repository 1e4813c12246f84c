"""Worker task: run the reference, save what the candidate is judged against, time it.

Runs in its own process (the candidate never shares it).  Writes to `work_dir`:
`ref_state.pt` (the reference's state_dict, built right after `manual_seed(seeds[0])`) and
`ref_outputs.pt` ({case id: CPU output leaves}).  Returns JSON: the cases with their seeds and
input shapes, output layout facts, the aten ops the reference dispatches, eager and
torch.compile timings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from kernelstitch.agents.verifier import timing
from kernelstitch.agents.verifier.compare import compare_outputs, flatten_outputs
from kernelstitch.agents.verifier.gpu_common import (
    as_bytes,
    describe_exception,
    pick_device,
    profile_calls,
    ranges_overlap,
    storage_ranges,
    strict_fp32,
    warm_start,
)
from kernelstitch.agents.verifier.inputs import (
    case_inputs,
    input_generation_seconds,
    input_shapes,
    shape_variants,
    to_device,
    total_bytes,
)
from kernelstitch.agents.verifier.stopwatch import Stopwatch
from kernelstitch.agents.verifier.trace_summary import summarize_trace

from kernelstitch.core.problem import load_problem

ROTATED_SETS = 3
ROTATION_MEMORY_FRACTION = 0.3  # rotated input sets may use this much of free GPU memory


def warm_up() -> None:
    """Called by the worker's preload: the driver and torch.compile's imports."""
    warm_start("torch._inductor.compile_fx")


def _case_list(seeds: list[int], variants: list[Any]) -> list[dict[str, Any]]:
    cases = [{"id": f"s{seed}", "seed": seed, "shapes": None, "variant": None} for seed in seeds]
    for i, shapes in enumerate(variants):
        seed = seeds[i % len(seeds)]
        cases.append({"id": f"s{seed}_v{i}", "seed": seed, "shapes": shapes, "variant": i})
    return cases


def _aliases(outputs: list[Any], inputs: list[Any]) -> bool:
    return ranges_overlap(storage_ranges(outputs), storage_ranges(inputs))


def timing_input_sets(problem, seeds: list[int], device: torch.device) -> list[list[Any]]:
    first = to_device(case_inputs(problem, seeds[0]), device)
    sets = [first]
    free, _ = torch.cuda.mem_get_info(device)
    per_set = max(total_bytes(first), 1)
    room = int(free * ROTATION_MEMORY_FRACTION // per_set)
    for seed in seeds[1:min(ROTATED_SETS, room)]:
        sets.append(to_device(case_inputs(problem, seed), device))
    return sets


def reference_task(path: str, module: str | None, seeds: list[int], work_dir: str,
                   shape_variants_count: int = 2, timing_on: bool = True,
                   compare_compile: bool = True, device: int | None = None,
                   timing_budget_s: float = 2.0) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"cuda": False, "torch": torch.__version__}
    watch = Stopwatch()
    with watch.section("build"):
        dev = pick_device(device)
        strict_fp32()
        notes: list[str] = []
        problem = load_problem(Path(path), module)
        torch.manual_seed(seeds[0])
        model = problem.build()
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()},
                   Path(work_dir) / "ref_state.pt")
        model = model.to(dev)
    result = _reference_outputs(problem, model, dev, seeds, work_dir, shape_variants_count,
                                notes, watch)
    if timing_on:
        result["timing"] = _time_reference(model, problem, seeds, dev, compare_compile,
                                           timing_budget_s, notes, watch)
    watch.add("of_which_inputs", input_generation_seconds())
    result["seconds"] = watch.to_json()
    return result


def _reference_outputs(problem, model, dev, seeds, work_dir, shape_variants_count, notes,
                       watch: Stopwatch) -> dict[str, Any]:
    with watch.section("cases"):
        case_facts = _run_cases(problem, model, dev, seeds, work_dir, shape_variants_count,
                                notes)
    with watch.section("op_trace"):
        first_inputs = to_device(case_inputs(problem, seeds[0]), dev)
        with torch.no_grad():
            trace = profile_calls(lambda _i: model(*first_inputs), 1, with_cuda=False)
        ops = sorted({op for call in summarize_trace(trace) for op, _ in call.ops})

    return {
        "cuda": True, "device_name": torch.cuda.get_device_name(dev), "torch": torch.__version__,
        **case_facts, "reference_ops": ops, "notes": notes,
        "state_keys": sorted(model.state_dict().keys()),
    }


def _run_cases(problem, model, dev, seeds, work_dir, shape_variants_count,
               notes) -> dict[str, Any]:
    """Outputs of every case (the problem's shapes, then the variants), saved for the
    candidate; returns the cases and what the runs showed about the reference."""

    def runs_on_device(shapes) -> bool:
        try:
            with torch.no_grad():
                model(*to_device(case_inputs(problem, seeds[0], shapes), dev))
            torch.cuda.synchronize(dev)
            return True
        except Exception:
            return False

    base = case_inputs(problem, seeds[0])
    variants, variant_notes = shape_variants(problem, base, shape_variants_count, runs_on_device)
    notes += variant_notes
    cases = _case_list(seeds, variants)
    outputs: dict[str, list[Any]] = {}
    mutates = aliases = False
    first_outputs: list[Any] = []
    for case in cases:
        cpu_inputs = case_inputs(problem, case["seed"], case["shapes"])
        dev_inputs = to_device(cpu_inputs, dev)
        # Device copies to spot in-place changes: comparing on the GPU, not through 1 GiB
        # host copies, keeps this seconds faster on large problems.
        originals = [v.clone() if isinstance(v, torch.Tensor) else None for v in dev_inputs]
        with torch.no_grad():
            out = flatten_outputs(model(*dev_inputs))
        torch.cuda.synchronize(dev)
        case["input_shapes"] = input_shapes(cpu_inputs)
        case["output_meta"] = [
            {"is_contiguous": o.is_contiguous(), "strides": list(o.stride()),
             "shape": list(o.shape), "nbytes": o.numel() * o.element_size(),
             "dtype": str(o.dtype)} if isinstance(o, torch.Tensor) else None for o in out]
        aliases = aliases or _aliases(out, dev_inputs)
        mutates = mutates or any(
            isinstance(a, torch.Tensor) and not torch.equal(as_bytes(a), as_bytes(b))
            for a, b in zip(dev_inputs, originals))
        del originals
        outputs[case["id"]] = [o.detach().cpu() if isinstance(o, torch.Tensor) else o
                               for o in out]
        if not first_outputs:
            first_outputs = out
        del out
    nondeterministic = _nondeterministic(model, problem, cases[0], first_outputs, dev)
    del first_outputs
    torch.save(outputs, Path(work_dir) / "ref_outputs.pt")
    return {"cases": cases, "variants": variants, "mutates_inputs": mutates,
            "output_aliases_input": aliases, "nondeterministic": nondeterministic}


def _nondeterministic(model, problem, case, first: list[Any], dev) -> str | None:
    """A reference that gives different answers for the same inputs cannot judge anything.
    (Compared on the GPU: both sides are the reference's own outputs.)"""
    with torch.no_grad():
        again = flatten_outputs(model(*to_device(case_inputs(problem, case["seed"]), dev)))
    info = [{"device": "ref", "contiguous": True, "strides": []} for _ in again]
    failures = compare_outputs(first, again, [], info, "ref")
    return failures[0].message if failures else None


def _time_reference(model, problem, seeds, dev, compare_compile, budget_s, notes,
                    watch: Stopwatch) -> dict:
    sets = timing_input_sets(problem, seeds, dev)
    flush = timing.L2Flusher(dev)

    def eager(inputs):
        with torch.no_grad():
            return model(*inputs)

    with watch.section("eager_timing"):
        eager_result = timing.time_function(eager, sets, flush, budget_s=budget_s).to_json()
    result = {"eager": eager_result, "rotated_sets": len(sets), "compiled": None}
    if compare_compile:
        try:
            compiled_model = torch.compile(model)

            def compiled(inputs):
                with torch.no_grad():
                    return compiled_model(*inputs)

            with watch.section("compile"):
                compiled(sets[0])  # compiles: not timed, but said
            notes.append(f"torch.compile of the reference took {watch.seconds['compile']:.1f} s "
                         "(first call, not part of its timing)")
            with watch.section("compiled_timing"):
                result["compiled"] = timing.time_function(compiled, sets, flush,
                                                          budget_s=budget_s).to_json()
        except Exception as exc:  # torch.compile failing is the reference's business, not ours
            notes.append(f"torch.compile of the reference failed: {describe_exception(exc)[:300]}")
    return result
