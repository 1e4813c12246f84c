"""Worker task: time the original module (eager, and replayed from a CUDA graph) and every
planned variant in one process, on the same input sets, in interleaved rounds (so clock and
thermal drift spread evenly over them).

This ranks programs the built-in coder wrote; it checks nothing.  Whichever is chosen is then
verified in full by the usual reference/candidate workers before anything is delivered
(`selection.py`).  A variant that fails to load or run is reported with its error and left out;
the others still get timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from kernelstitch.agents.verifier import timing  # bound before any variant's code runs
from kernelstitch.agents.verifier.gpu_common import (
    describe_exception,
    pick_device,
    profile_calls,
    strict_fp32,
)
from kernelstitch.agents.verifier.graph_replay import GraphedModule
from kernelstitch.agents.verifier.inputs import case_inputs
from kernelstitch.agents.verifier.precision_scope import baseline_precision, timing_settings
from kernelstitch.agents.verifier.selection import ORIGINAL, ORIGINAL_FP32, ORIGINAL_GRAPH
from kernelstitch.agents.verifier.trace_summary import kernel_durations

from kernelstitch.core.precision import precision_mode
from kernelstitch.core.problem import import_file, load_problem

ROUNDS = 3
MIN_RUNS_PER_ROUND = 5
WARMUP_CALLS = 3
PROFILED_CALLS = 3


def time_variants_task(reference_path: str, module: str | None, variants: list[dict[str, str]],
                       seed: int, device: int | None = None, budget_s: float = 3.0,
                       input_sets: int = 2, profile: bool = False,
                       precision: str = "fp32") -> dict[str, Any]:
    """{"original": samples, "original_graph": {"samples_ms": [...]} or {"error": ...},
    "variants": {name: {"samples_ms": [...]} or {"error": ...}}, "profile": {"variant": the
    fastest variant, "kernel_ms": {kernel name: ms over PROFILED_CALLS calls}} (with
    `profile`)}.  `precision`: the user's opt-in; the original (eager and graphed) runs with
    it allowed (precision_scope.py), the floor a variant must beat; the variants hold their own.
    Everything runs under PyTorch's default settings otherwise (cuDNN TF32 on), as users run it."""
    if not torch.cuda.is_available():
        return {"error": "no CUDA device"}
    dev = pick_device(device)
    strict_fp32()
    problem = load_problem(Path(reference_path), module)
    torch.manual_seed(seed)
    original = problem.build().to(dev)
    # The graphed original replays the same module object: same parameters, same results.
    programs: dict[str, Any] = {ORIGINAL: original, ORIGINAL_GRAPH: GraphedModule(original)}
    if precision_mode(precision).reduced:
        programs[ORIGINAL_FP32] = original  # the module as the user runs it today
    errors: dict[str, str] = {}
    for variant in variants:
        try:
            namespace = import_file(Path(variant["path"]), prefix="ks_variant")
            torch.manual_seed(seed)
            programs[variant["name"]] = namespace.ModelNew(*problem.get_init_inputs()).to(dev)
        except Exception as exc:  # noqa: BLE001 - reported per variant
            errors[variant["name"]] = f"load: {describe_exception(exc)[:300]}"
    sets = [case_inputs(problem, seed + k, None, dev) for k in range(max(1, input_sets))]
    def scope(name: str):
        if name in (ORIGINAL, ORIGINAL_GRAPH):
            return baseline_precision(precision)
        return timing_settings(precision)

    for name, model in list(programs.items()):
        try:
            with torch.no_grad(), scope(name):
                for _ in range(WARMUP_CALLS):  # builds extensions, captures CUDA graphs
                    model(*sets[0])
            torch.cuda.synchronize(dev)
        except Exception as exc:  # noqa: BLE001
            if name == ORIGINAL:
                return {"error": f"the original failed: {describe_exception(exc)[:300]}"}
            errors[name] = f"run: {describe_exception(exc)[:300]}"
            del programs[name]
            torch.cuda.synchronize(dev)  # a failed capture leaves the stream to recover
            torch.cuda.empty_cache()
    flush = timing.L2Flusher(dev)
    samples: dict[str, list[float]] = {name: [] for name in programs}
    per_round = budget_s / ROUNDS / max(1, len(programs))
    for _ in range(ROUNDS):
        for name, model in programs.items():
            def call(inputs, model=model):
                return model(*inputs)
            # entered once per round, not per call: inside the timed calls it would cost
            # microseconds of every launch-bound program's time
            with torch.no_grad(), scope(name):
                result = timing.time_function(call, sets, flush, min_runs=MIN_RUNS_PER_ROUND,
                                              budget_s=per_round)
            samples[name] += result.samples_ms
    fastest = _fastest_variant(samples)
    found = None
    if profile and fastest:
        with scope(fastest):
            found = _kernel_profile(programs[fastest], sets[0])
    timed = {**{n: {"samples_ms": s} for n, s in samples.items()},
             **{n: {"error": e} for n, e in errors.items()}}
    fp32 = timed.pop(ORIGINAL_FP32, None)
    return {"original": timed.pop(ORIGINAL)["samples_ms"], "original_graph": timed.pop(ORIGINAL_GRAPH),
            **({"original_fp32": fp32.get("samples_ms")} if fp32 else {}),
            "device_name": torch.cuda.get_device_name(dev), "variants": timed,
            **({"profile": {"variant": fastest, "kernel_ms": found}} if found else {})}


def _fastest_variant(samples: dict[str, list[float]]) -> str | None:
    medians = {n: sorted(s)[len(s) // 2] for n, s in samples.items()
               if s and n not in (ORIGINAL, ORIGINAL_GRAPH, ORIGINAL_FP32)}
    return min(medians, key=medians.__getitem__) if medians else None


def _kernel_profile(model: Any, inputs: list[Any]) -> dict[str, float] | None:
    """GPU time per kernel of a few calls (None when the profiler fails: a next round is an
    optimisation, never a reason to fail the timing)."""
    def call(_index: int) -> None:
        with torch.no_grad():
            model(*inputs)

    try:
        return kernel_durations(profile_calls(call, PROFILED_CALLS, with_cuda=True))
    except Exception:  # noqa: BLE001
        return None
