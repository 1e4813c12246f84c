"""Worker task: run the reference, learn what the candidate is judged against, time it, judge.

Runs in its own process (the candidate never shares it).  Writes `ref_state.pt` (the
reference's state_dict, built right after `manual_seed(seeds[0])`) to `work_dir`.  Returns
JSON: the cases with their seeds and input shapes, output layout facts, the memory plan, the
aten ops the reference dispatches, eager and torch.compile timings, and the address of the
judge it then serves from this process (`judge.py`): every later check of the candidate is
compared here, on the GPU, against an output the reference computes for that check.
"""

from __future__ import annotations

import copy
import gc
import sys
from pathlib import Path
from typing import Any

import torch
import torch._dynamo
from kernelstitch.agents.verifier import timing
from kernelstitch.agents.verifier.compare import (
    Failure,
    OutputMeta,
    compare_outputs,
    compare_with_exact,
    flatten_outputs,
    precision_errors,
)
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
    digest,
    input_generation_seconds,
    input_shapes,
    is_bool_mask,
    long_sequence_shapes,
    shape_variants,
    total_bytes,
)
from kernelstitch.agents.verifier.judge import JudgeServer, UnreadableLeaf, decode_leaf
from kernelstitch.agents.verifier.memory_plan import MemoryPlan, fits_scaled, plan_memory
from kernelstitch.agents.verifier.op_names import canonical_op, defaults_allow_tf32
from kernelstitch.agents.verifier.precision_scope import baseline_precision, pytorch_defaults
from kernelstitch.agents.verifier.stopwatch import Stopwatch
from kernelstitch.agents.verifier.stress_cases import StressPlan, plan_stress
from kernelstitch.agents.verifier.tolerances import (
    EXACT_FACTOR,
    PRECISION_TOLERANCES,
    REDUCED_EXACT_FACTOR,
)
from kernelstitch.agents.verifier.trace_summary import summarize_trace

from kernelstitch.core.precision import float64_describes, precision_mode
from kernelstitch.core.problem import load_problem

_JUDGES: list[JudgeServer] = []  # alive as long as this worker process


def warm_up() -> None:
    """Called by the worker's preload: the driver and torch.compile's imports."""
    warm_start("torch._inductor.compile_fx")


def _case_list(seeds: list[int], variants: list[Any],
               transforms: list[str] = ()) -> list[dict[str, Any]]:
    """The problem's shapes per seed, one case of the first seed's inputs per transform (the
    wide-range case of a reduced precision, the stress cases: inputs.TRANSFORMS), then the shape
    variants."""
    cases = [{"id": f"s{seed}", "seed": seed, "shapes": None, "variant": None} for seed in seeds]
    for transform in transforms:
        cases.append({"id": f"s{seeds[0]}_{transform}", "seed": seeds[0], "shapes": None,
                      "variant": None, "transform": transform})
    for i, shapes in enumerate(variants):
        seed = seeds[i % len(seeds)]
        cases.append({"id": f"s{seed}_v{i}", "seed": seed, "shapes": shapes, "variant": i})
    return cases


def _aliases(outputs: list[Any], inputs: list[Any]) -> bool:
    return ranges_overlap(storage_ranges(outputs), storage_ranges(inputs))


def timing_input_sets(problem, seeds: list[int], device: torch.device,
                      count: int) -> list[list[Any]]:
    """Up to `count` input sets (the memory plan's rotated_sets) to rotate through in timing."""
    return [case_inputs(problem, seed, None, device) for seed in seeds[:max(count, 1)]]


def add_import_fallback(folder: str | None) -> None:
    """`path` is the verifier's snapshot of the reference (snapshot.py), whose folder goes first
    on sys.path; the user's folder comes last, for an import the snapshot's scan could not see
    (importlib.import_module of a computed name)."""
    if folder and folder not in sys.path:
        sys.path.append(folder)


def reference_task(path: str, module: str | None, seeds: list[int], work_dir: str,
                   shape_variants_count: int = 2, timing_on: bool = True,
                   compare_compile: bool = True, device: int | None = None,
                   timing_budget_s: float = 2.0,
                   import_fallback: str | None = None, precision: str = "fp32") -> dict[str, Any]:
    """`precision`: the user's opt-in (kernelstitch/core/precision.py).  The reference is
    compared in strict fp32 and timed under PyTorch's defaults; a reduced precision adds the
    baselines allowed it (timing) and has the judge compare against a float64 recomputation with
    the precision's bound."""
    precision = precision_mode(precision).name
    add_import_fallback(import_fallback)
    if not torch.cuda.is_available():
        return {"cuda": False, "torch": torch.__version__}
    watch = Stopwatch()
    task_start = watch.now()
    with watch.section("build"):
        dev = pick_device(device)
        strict_fp32()
        free_bytes = torch.cuda.mem_get_info(dev)[0]  # this process's context already counted
        notes: list[str] = []
        problem = load_problem(Path(path), module)
        torch.manual_seed(seeds[0])
        model = problem.build()
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()},
                   Path(work_dir) / "ref_state.pt")
        model = model.to(dev)
    param_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    try:
        result = _reference_outputs(problem, model, dev, seeds, shape_variants_count, notes,
                                    watch, free_bytes, param_bytes, precision)
    except torch.OutOfMemoryError as exc:
        plan = plan_memory(free_bytes, param_bytes, 0, 0)
        result = {"cuda": True, "device_name": torch.cuda.get_device_name(dev),
                  "too_large": f"the reference alone ran out of GPU memory "
                               f"({describe_exception(exc)[:300]}); {_gb(free_bytes)} was free",
                  "memory_plan": plan.to_json(), "notes": notes}
    if result.get("too_large"):
        return result
    plan = MemoryPlan.from_json(result["memory_plan"])
    if timing_on:
        result["timing"] = _time_reference(model, problem, seeds, dev, compare_compile,
                                           timing_budget_s, notes, watch, plan.rotated_sets,
                                           precision)
    watch.add("of_which_inputs", input_generation_seconds())
    watch.add_since("in_task", task_start)  # the stage's wall time minus this: start-up
    result["seconds"] = watch.to_json()
    gc.collect()
    torch.cuda.empty_cache()  # the memory plan gives the rest of the device to the candidate
    judge = _Judge(problem, model, dev, result["cases"], precision,
                   float64=bool(result.get("float64_reference")),
                   tf32_ops=defaults_allow_tf32(result.get("reference_ops", [])))
    server = JudgeServer(work_dir, judge.handle)
    _JUDGES.append(server)
    _LEDGERS.append(judge.ledger)
    result["judge"] = server.address.to_json()
    return result


_LEDGERS: list[list[dict[str, Any]]] = []


def judge_ledger() -> dict[str, Any]:
    """Worker task on the reference worker, after the candidate's phases: every comparison its
    judge made (case, failure codes), kept in this process, out of the candidate's reach.  The
    candidate's process reports its checks itself; protect.py matches each check it reports as
    passed to a comparison here that found nothing (else `judge_bypassed`)."""
    return {"entries": list(_LEDGERS[-1]) if _LEDGERS else [], "judges": len(_LEDGERS)}


def _gb(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def _reference_outputs(problem, model, dev, seeds, shape_variants_count, notes,
                       watch: Stopwatch, free_bytes: int, param_bytes: int,
                       precision: str = "fp32") -> dict[str, Any]:
    base = {"cuda": True, "device_name": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "notes": notes}
    with watch.section("op_trace"):  # first: the ops choose the stress cases
        first_inputs = case_inputs(problem, seeds[0], None, dev)
        has_bool_mask = any(is_bool_mask(v) for v in first_inputs)
        with torch.no_grad():
            model(*first_inputs)  # a first call's own work (lazy modules) is not the ops of a call
            trace = profile_calls(lambda _i: model(*first_inputs), 1, with_cuda=False)
        first_inputs.clear()
        ops = sorted({op for call in summarize_trace(trace) for op, _ in call.ops})
    stress = plan_stress((canonical_op(op) for op in ops),
                         reduced_precision=precision_mode(precision).reduced,
                         has_bool_mask=has_bool_mask)
    if stress.reason:
        notes.append(stress.reason)
    with watch.section("cases"):
        case_facts = _run_cases(problem, model, dev, seeds, shape_variants_count, notes,
                                free_bytes, param_bytes, precision, stress)
    if case_facts.get("too_large"):
        return {**base, **case_facts}
    return {**base, **case_facts, "reference_ops": ops,
            "state_keys": sorted(model.state_dict().keys())}


def plan_with_float64(free_bytes: int, param_bytes: int, input_bytes: int, output_bytes: int,
                      reduced: bool) -> tuple[MemoryPlan, bool]:
    """(the memory plan, whether the judge may recompute in float64).  Under a reduced precision
    the judge keeps a float64 copy of the model and computes float64 outputs for every case:
    planned for (memory_plan.py's judge_float64), or refused when they do not fit beside the
    checks.  Under fp32 the float64 recomputation is the occasional second opinion on
    cancellation, as before."""
    if not reduced:
        return plan_memory(free_bytes, param_bytes, input_bytes, output_bytes), True
    plan = plan_memory(free_bytes, param_bytes, input_bytes, output_bytes, judge_float64=True)
    if plan.fits:
        return plan, True
    return plan_memory(free_bytes, param_bytes, input_bytes, output_bytes), False


def _output_meta(out: list[Any]) -> list[dict[str, Any] | None]:
    return [{"is_contiguous": o.is_contiguous(), "strides": list(o.stride()),
             "shape": list(o.shape), "nbytes": o.numel() * o.element_size(),
             "dtype": str(o.dtype)} if isinstance(o, torch.Tensor) else None for o in out]


def _run_cases(problem, model, dev, seeds, shape_variants_count, notes, free_bytes,
               param_bytes, precision: str = "fp32",
               stress: StressPlan = StressPlan()) -> dict[str, Any]:
    """Runs every case once (the problem's shapes, then the variants) for what the runs show
    about the reference (output layout, in-place changes, aliasing); the outputs themselves are
    recomputed by the judge when a check needs them."""

    def runs_on_device(shapes) -> bool:
        try:
            with torch.no_grad():
                model(*case_inputs(problem, seeds[0], shapes, dev))
            torch.cuda.synchronize(dev)
            return True
        except Exception:
            return False

    base = case_inputs(problem, seeds[0], None, dev)
    input_bytes = total_bytes(base)
    with torch.no_grad():
        first_out = flatten_outputs(model(*base))
    output_bytes = total_bytes(first_out)
    del first_out
    reduced = precision_mode(precision).reduced
    plan, float64_reference = plan_with_float64(free_bytes, param_bytes, input_bytes,
                                                output_bytes, reduced)
    if reduced and plan.fits and not float64_reference:
        notes.append("no GPU memory for a float64 copy of the model beside the checks: "
                     f"{precision} is compared with the fp32 reference at its bound")
    if not plan.fits:
        return {"too_large": plan.too_large_message(), "memory_plan": plan.to_json()}
    notes.append(plan.summary())
    is_tensor = [isinstance(v, torch.Tensor) for v in base]
    base_elements = max(sum(v.numel() for v in base if isinstance(v, torch.Tensor)), 1)

    def scale(shapes) -> float:
        return sum(_numel(s) for t, s in zip(is_tensor, shapes) if t and s is not None) / base_elements

    def fits(shapes) -> bool:
        return fits_scaled(plan, scale(shapes))

    def long_fits(shapes) -> bool:  # the scores of attention: the square of the inputs' growth
        return fits_scaled(plan, scale(shapes) ** 2)

    variants, variant_notes = shape_variants(problem, base, shape_variants_count, runs_on_device,
                                             fits, long_sequence=stress.long_sequence,
                                             long_fits=long_fits)
    long_shapes = long_sequence_shapes(input_shapes(base), [is_bool_mask(v) for v in base]) \
        if stress.long_sequence else None
    del base
    notes += variant_notes
    # shape_variants appends it last, when the reference takes it
    long_variant = len(variants) - 1 if variants and variants[-1] == long_shapes else None
    cases = _case_list(seeds, variants, (["wide"] if reduced else []) + stress.transforms())
    mutates = aliases = False
    for case in list(cases):
        optional = case.get("transform") is not None or (
            long_variant is not None and case["variant"] == long_variant)
        dev_inputs = case_inputs(problem, case["seed"], case["shapes"], dev, case.get("transform"))
        # Device copies to spot in-place changes, compared on the GPU.
        originals = [v.clone() if isinstance(v, torch.Tensor) else None for v in dev_inputs]
        try:
            with torch.no_grad():
                out = flatten_outputs(model(*dev_inputs))
            torch.cuda.synchronize(dev)
            # the large case only: masked rows' NaN (softmax of a row of -inf) is the point, and
            # the wide case shrinks values
            left_out = _non_finite(out) if case.get("transform") == "large_logits" else None
        except Exception as exc:  # noqa: BLE001 - only an optional case may fail: left out
            if not optional:
                raise
            left_out = f"the reference fails on it ({describe_exception(exc)[:200]})"
            gc.collect()
            torch.cuda.empty_cache()
        if left_out:
            cases.remove(case)
            if case["variant"] is not None:
                variants.pop(case["variant"])  # the last variant: no other index moves
            notes.append(f"the {_case_name(case)} case was left out: {left_out}")
            out = dev_inputs = originals = None
            continue
        case["input_shapes"] = input_shapes(dev_inputs)
        case["output_meta"] = _output_meta(out)
        aliases = aliases or _aliases(out, dev_inputs)
        mutates = mutates or any(
            isinstance(a, torch.Tensor) and not torch.equal(as_bytes(a), as_bytes(b))
            for a, b in zip(dev_inputs, originals))
        del originals, out, dev_inputs
    nondeterministic = _nondeterministic(model, problem, cases[0], dev)
    return {"cases": cases, "variants": variants, "mutates_inputs": mutates,
            "output_aliases_input": aliases, "nondeterministic": nondeterministic,
            "memory_plan": plan.to_json(), "float64_reference": float64_reference}


def _case_name(case: dict[str, Any]) -> str:
    names = {"wide": "wide-range", "large_logits": "large-logits", "masked_rows": "masked-rows"}
    return names.get(case.get("transform"), "long-sequence")


def _non_finite(outputs: list[Any]) -> str | None:
    """Why a stress case has nothing to judge against: the reference's outputs are not finite."""
    for index, o in enumerate(outputs):
        if isinstance(o, torch.Tensor) and o.is_floating_point() and not bool(torch.isfinite(o).all()):
            return f"the reference's output {index} has NaN or Inf values there"
    return None


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _nondeterministic(model, problem, case, dev) -> str | None:
    """A reference that gives different answers for the same inputs cannot judge anything."""
    outputs = []
    for _ in range(2):
        with torch.no_grad():
            outputs.append(flatten_outputs(model(*case_inputs(problem, case["seed"], None, dev))))
    info = [{"device": "ref", "contiguous": True, "strides": []} for _ in outputs[1]]
    failures = compare_outputs(outputs[0], outputs[1], [], info, "ref")
    return failures[0].message if failures else None


def _time_reference(model, problem, seeds, dev, compare_compile, budget_s, notes,
                    watch: Stopwatch, rotated_sets: int, precision: str = "fp32") -> dict:
    """Eager and torch.compile timings of the reference under PyTorch's default settings (what
    the user runs).  Under a reduced precision both are allowed it (precision_scope.py) and
    `eager_fp32` is the eager time under the defaults besides."""
    sets = timing_input_sets(problem, seeds, dev, rotated_sets)
    flush = timing.L2Flusher(dev)
    reduced = precision_mode(precision).reduced

    def eager(inputs):
        with torch.no_grad():
            return model(*inputs)

    result: dict[str, Any] = {"rotated_sets": len(sets), "compiled": None, "precision": precision}
    if reduced:
        with watch.section("eager_fp32_timing"), pytorch_defaults():
            result["eager_fp32"] = timing.time_function(eager, sets, flush,
                                                        budget_s=budget_s).to_json()
    with watch.section("eager_timing"), baseline_precision(precision):
        result["eager"] = timing.time_function(eager, sets, flush, budget_s=budget_s).to_json()
    if compare_compile:
        try:
            compiled_model = torch.compile(model)

            def compiled(inputs):
                with torch.no_grad():
                    return compiled_model(*inputs)

            with baseline_precision(precision):
                with watch.section("compile"):
                    compiled(sets[0])  # compiles: not timed, but said
                notes.append(f"torch.compile of the reference took {watch.seconds['compile']:.1f} s "
                             "(first call, not part of its timing)"
                             + (f"; eager and torch.compile timed with {precision} allowed "
                                f"({precision_mode(precision).baseline})" if reduced else ""))
                with watch.section("compiled_timing"):
                    result["compiled"] = timing.time_function(compiled, sets, flush,
                                                              budget_s=budget_s).to_json()
        except Exception as exc:  # torch.compile failing is the reference's business, not ours
            notes.append(f"torch.compile of the reference failed: {describe_exception(exc)[:300]}")
        finally:
            torch._dynamo.reset()  # the judge runs the eager model; free what compile holds
    return result


class _Judge:
    """Compares one check's candidate outputs (CUDA IPC) with the reference's, on this GPU.

    The case comes from this process's own list, by id: the candidate's process names which
    check it ran but not what the inputs or the expected outputs are."""

    def __init__(self, problem, model, dev: torch.device, cases: list[dict[str, Any]],
                 precision: str = "fp32", float64: bool = True, tf32_ops: bool = False) -> None:
        self.problem, self.model, self.dev = problem, model, dev
        # the original calls ops that PyTorch's defaults let cuDNN run in TF32 (op_names.py)
        self.tf32_ops = tf32_ops
        self.cases = {c["id"]: c for c in cases}
        self.precision = precision
        # the float64 copy, made once under a reduced precision (False: it could not run, or
        # the memory plan has no room for it)
        self._model64: Any = None if float64 else False
        self.ledger: list[dict[str, Any]] = []  # one entry per reply (judge_ledger)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        case = self.cases.get(request.get("case"))
        if request.get("op") != "compare" or case is None:
            return {"error": "unknown request or case"}
        reply: dict[str, Any] = {"error": "the comparison raised"}
        try:
            reply = self._compare(case, request)
            return reply
        finally:
            self.ledger.append({"case": case["id"], "error": bool(reply.get("error")),
                                "codes": [f.get("code") for f in reply.get("failures") or []],
                                # compared at the timing settings' bound: vouches for that
                                # check only (protect.py)
                                "timing_settings": bool(request.get("timing_settings")),
                                "float64": "float64_errors" in reply,
                                **({"precision": self.precision,
                                    "precision_errors": reply.get("precision_errors"),
                                    "float64_reference": reply.get("float64_reference")}
                                   if precision_mode(self.precision).reduced else {})})
            gc.collect()
            torch.cuda.empty_cache()

    def _compare(self, case: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        inputs = case_inputs(self.problem, case["seed"], case["shapes"], self.dev,
                             case.get("transform"))
        if digest(inputs) != request.get("inputs_digest"):
            return {"error": "the candidate's process generated other inputs for this case than "
                             "the judge (get_inputs draws from a generator other than torch's, "
                             "or the processes differ in device or torch build)"}
        # the random state the reference drew from (dropout): a rerun from it draws the same
        rng = _rng_state(self.dev)
        with torch.no_grad():
            reference = flatten_outputs(self.model(*inputs))
        cand, info, unreadable = [], [], []
        for index, data in enumerate(request.get("outputs") or []):
            try:
                leaf = decode_leaf(data, self.dev)
            except UnreadableLeaf as exc:
                unreadable.append(Failure("unreadable_output", f"output {index}: {exc}"))
                leaf = None
            cand.append(leaf)
            info.append({"device": str(leaf.device) if isinstance(leaf, torch.Tensor) else "",
                         "contiguous": leaf.is_contiguous() if isinstance(leaf, torch.Tensor)
                         else True,
                         "strides": list(leaf.stride()) if isinstance(leaf, torch.Tensor)
                         else []})
        if unreadable:
            return {"failures": [f.to_json() for f in unreadable]}
        metas = [_meta(m) for m in case["output_meta"]]
        expected = str(torch.device("cuda", self.dev.index))
        reply: dict[str, Any] = {}
        if precision_mode(self.precision).reduced:
            failures = self._compare_reduced(inputs, reference, cand, metas, info, expected, reply)
        elif request.get("timing_settings"):
            failures = self._compare_timing_settings(inputs, reference, cand, metas, info,
                                                     expected, rng)
        else:
            failures = self._compare_fp32(inputs, reference, cand, metas, info, expected, rng,
                                          reply)
        torch.cuda.synchronize(self.dev)  # done reading the candidate's memory before replying
        reply["failures"] = [f.to_json() for f in failures]
        return reply

    def _compare_reduced(self, inputs, reference, cand, metas, info, expected,
                         reply: dict[str, Any]) -> list[Failure]:
        """Under a reduced precision: against the float64 recomputation (rounded to each
        output's dtype) with the precision's bound, the errors reported either way.  Outputs
        near zero by cancellation get the second opinion against PyTorch at the same precision
        (as accurate as the baseline the user would otherwise run)."""
        exact = self._float64_reference(inputs, keep_model=True)
        reply["float64_reference"] = exact is not None
        if exact is None:  # an op without float64, or no memory: the fp32 reference instead
            return compare_outputs(reference, cand, metas, info, expected, self.precision)
        rounded = [e.to(r.dtype) if isinstance(e, torch.Tensor) and isinstance(r, torch.Tensor)
                   else r for e, r in zip(exact, reference)]
        reply["precision_errors"] = errors = precision_errors(exact, cand, reference)
        bound = PRECISION_TOLERANCES[self.precision].atol
        if not all(float64_describes(e.get("fp32_max_rel_error"), bound) for e in errors):
            # the float64 recomputation is another computation (random draws: training-mode
            # dropout draws another mask in float64), so neither it nor an error measured from it
            # can judge: the fp32 reference, which drew what the candidate drew, at the bound
            reply["float64_unrelated"] = True
            return compare_outputs(reference, cand, metas, info, expected, self.precision)
        failures = compare_outputs(rounded, cand, metas, info, expected, self.precision)
        if failures and all(f.code == "wrong_output" for f in failures):
            with torch.no_grad(), baseline_precision(self.precision):
                baseline = flatten_outputs(self.model(*inputs))
            failures, reply["float64_errors"] = compare_with_exact(
                baseline, cand, exact, REDUCED_EXACT_FACTOR)
        return failures

    def _compare_fp32(self, inputs, reference, cand, metas, info, expected,
                      rng: tuple[Any, Any] | None, reply: dict[str, Any]) -> list[Failure]:
        """fp32's bound against the strict reference; outputs that fail it only as
        `wrong_output` (cancellation) get the float64 second opinion, unless the model draws
        random numbers: a float64 recomputation then draws others and judges nothing."""
        failures = compare_outputs(reference, cand, metas, info, expected)
        return self._second_opinion(inputs, reference, reference, cand, failures, rng,
                                    EXACT_FACTOR, reply)

    def _second_opinion(self, inputs, reference, baseline, cand, failures: list[Failure],
                        rng: tuple[Any, Any] | None, factor: float,
                        reply: dict[str, Any]) -> list[Failure]:
        """Failures that are all `wrong_output` judged again against a float64 recomputation,
        the candidate allowed `factor` times `baseline`'s own error from it; not for a model
        that draws random numbers (`reply` says so), whose float64 run draws others."""
        if not failures or not all(f.code == "wrong_output" for f in failures):
            return failures
        if self._draws_random(inputs, reference, rng):
            reply["float64_unrelated"] = True
            return failures
        exact = self._float64_reference(inputs)
        if exact is not None:
            failures, reply["float64_errors"] = compare_with_exact(baseline, cand, exact, factor)
        return failures

    def _draws_random(self, inputs, reference, rng: tuple[Any, Any] | None) -> bool:
        """Whether the model draws random numbers (training-mode dropout): rerun from the random
        state after the reference's call it gives another result, rerun from the state the
        reference drew from the same one.  (A result that differs both ways comes from
        nondeterministic kernels, atomics: not random draws.)"""
        if rng is None:
            return False
        with torch.no_grad():
            later = flatten_outputs(self.model(*inputs))
        repeats = all(_same(a, b) for a, b in zip(later, reference))
        del later  # one extra output at a time beside the memory plan's
        if repeats:
            return False
        _set_rng_state(self.dev, rng)
        with torch.no_grad():
            again = flatten_outputs(self.model(*inputs))
        return all(_same(a, b) for a, b in zip(again, reference))

    def _compare_timing_settings(self, inputs, reference, cand, metas, info, expected,
                                 rng: tuple[Any, Any] | None = None) -> list[Failure]:
        """The candidate ran under PyTorch's defaults, as while timed.  Where those may change
        the original's result (it calls cuDNN convolutions or RNNs, which they allow in TF32:
        whether cuDNN takes a TF32 kernel depends on the layout and shapes, so the same conv
        channels-last may where the original's did not) or do change it, the candidate gets
        TF32's bound against the strict reference, and outputs near zero by cancellation the
        second opinion against the original under the same defaults; where they can change
        nothing, fp32's bound and second opinion, as every other check: a program may not lower
        its own precision while timed."""
        if rng is not None:
            _set_rng_state(self.dev, rng)
        with torch.no_grad(), pytorch_defaults():
            baseline = flatten_outputs(self.model(*inputs))
        changed = self.tf32_ops or not all(_same(a, b) for a, b in zip(baseline, reference))
        failures = compare_outputs(reference, cand, metas, info, expected,
                                   "tf32" if changed else "fp32")
        # its own reply fields stay out of the ledger (this check's comparison is its own)
        return self._second_opinion(inputs, reference, baseline, cand, failures, rng,
                                    REDUCED_EXACT_FACTOR if changed else EXACT_FACTOR, {})

    def _float64_reference(self, inputs: list[Any], keep_model: bool = False) -> list[Any] | None:
        """The case recomputed in float64 (a copy of the model and of the inputs), for
        compare_with_exact; None when the model cannot run in float64 or memory is short.
        `keep_model`: keep the copy for the next case (every case needs it)."""
        if self._model64 is False:  # it failed before: every case would fail alike
            return None
        try:
            model = self._model64 if self._model64 is not None else copy.deepcopy(self.model).double()
            wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
            with torch.no_grad():
                outputs = flatten_outputs(model(*wide))
            if keep_model:
                self._model64 = model  # kept only once it has run
            return outputs
        except Exception:  # noqa: BLE001 - float64 unsupported by an op, or out of memory
            if keep_model:
                self._model64 = False
            gc.collect()
            torch.cuda.empty_cache()
            return None


def _rng_state(dev: torch.device) -> tuple[Any, Any]:
    return (torch.get_rng_state(),
            torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None)


def _set_rng_state(dev: torch.device, state: tuple[Any, Any]) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], dev)


def _same(a: Any, b: Any) -> bool:
    """Bit-for-bit the same output (NaN where the other has NaN)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.is_floating_point():
            return bool(((a == b) | (a.isnan() & b.isnan())).all())
        return torch.equal(a, b)
    return a == b


def _meta(data: dict[str, Any] | None) -> OutputMeta | None:
    return OutputMeta(data["is_contiguous"], tuple(data["strides"])) if data else None
