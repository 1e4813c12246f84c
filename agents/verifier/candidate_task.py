"""Worker task: compile, check and time the candidate in a fresh process.

The process never runs the reference and never holds a reference output: each checked call's
outputs are compared by the judge (the reference worker, `judge.py`), which maps them through
CUDA IPC, so nothing is copied to the CPU.  Inputs are generated on the GPU from the case's
seed, in this process and again in the judge.  Everything the checks rely on (timers, events,
copies) is bound before the candidate is imported, and `tamper` reports any replacement.

Phase "main" runs the problem's own shapes, interleaving checks with timing:
    check(seed 0) -> time (half) -> check(seed 1..n-1) -> time (half) -> re-check(seed 0)
    -> check(last seed) under the timing's settings -> profile two calls (and two under the
    timing's settings) -> tamper check
Checks run in strict fp32, timing under the user's settings (PyTorch's defaults unless the
precision is `strict`).
Phase "variants" checks the other input shapes: a second task in the same worker, on the same
model object (a crash on an odd shape cannot hide the main results, which came back first).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from kernelstitch.agents.verifier import tamper, timing  # bound before any candidate code runs
from kernelstitch.agents.verifier.compare import Failure, flatten_outputs
from kernelstitch.agents.verifier.diagnostics import map_diagnostics
from kernelstitch.agents.verifier.gpu_common import (
    as_bytes,
    describe_exception,
    is_cuda_fatal,
    pick_device,
    profile_calls,
    ranges_overlap,
    storage_ranges,
    strict_fp32,
    warm_start,
)
from kernelstitch.agents.verifier.inputs import case_inputs, digest, input_generation_seconds
from kernelstitch.agents.verifier.judge import JudgeAddress, JudgeClient, encode_leaf
from kernelstitch.agents.verifier.memory_plan import TAIL_SNAPSHOT_BYTES, MemoryPlan
from kernelstitch.agents.verifier.poison import poison_allocator
from kernelstitch.agents.verifier.precision_scope import timing_settings
from kernelstitch.agents.verifier.reference_task import add_import_fallback, timing_input_sets
from kernelstitch.agents.verifier.stopwatch import Stopwatch
from kernelstitch.agents.verifier.trace_summary import summarize_trace
from kernelstitch.agents.verifier.verdict import TIMING_SETTINGS_CHECK

from kernelstitch.core import sandbox
from kernelstitch.core.precision import precision_mode
from kernelstitch.core.problem import ProblemError, import_file, load_problem

_to_cpu = torch.Tensor.cpu
_to = torch.Tensor.to
_clone = torch.Tensor.clone
_equal = torch.equal
_Stream = torch.cuda.Stream
_Event = torch.cuda.Event
_profile = torch.profiler.profile
_record_function = torch.profiler.record_function
_StorageWeakRef = torch.multiprocessing.reductions.StorageWeakRef
_empty_cache = torch.cuda.empty_cache
_ipc_collect = torch.cuda.ipc_collect
BUILD_ERROR_MARKER = "Error building extension"
OCCUPIER_SIZE = 4096  # fp32 GEMM of this size (TF32 off): a few ms with every SM busy
WARMUP_CALLS_WITHOUT_TIMING = 10


class _Fatal(Exception):
    """The CUDA context is gone: no further call can be trusted."""


@dataclass
class _State:
    model: Any
    problem: Any
    device: torch.device
    judge: JudgeClient
    plan: MemoryPlan
    ref_mutates: bool
    ref_aliases: bool
    snapshot_stream: Any = None  # high priority: snapshots overtake work still running
    occupier: Any = None  # keeps every SM busy while forward launches (see _Occupier)
    notes: list[str] = field(default_factory=list)  # the task result's notes
    occupier_attempts: int = 1  # the load's (see _ensure_occupier)
    # The last checked call's output storages, weakly: one still alive after this process
    # dropped its own references is held by the candidate (a cached output).
    previous: list[tuple[Any, tuple[int, int]]] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    watch: Stopwatch = field(default_factory=Stopwatch)
    precision: str = "fp32"  # the user's: which settings the timing runs under
    # settings the candidate changed while under the timing settings (whose restore hides them)
    timing_tamper: list[dict[str, Any]] = field(default_factory=list)


def warm_up() -> None:
    """Called by the worker's preload: the driver and the extension builder candidates import."""
    warm_start("torch.utils.cpp_extension")


def _failure_json(code: str, message: str, **detail: Any) -> dict[str, Any]:
    return Failure(code, message, detail).to_json()


def _import_candidate(path: Path, source: str) -> tuple[Any, dict[str, Any] | None]:
    try:
        return import_file(path, prefix="ks_candidate"), None
    except ProblemError as exc:
        return None, _load_failure(exc, source)


def _load_failure(exc: BaseException, source: str) -> dict[str, Any]:
    text = describe_exception(exc)
    if BUILD_ERROR_MARKER in text:
        cause = exc.__cause__ or exc
        output = str(cause)
        diagnostics = [d.to_json() for d in map_diagnostics(output, source)]
        first = next((d for d in diagnostics if d["severity"] == "error"), None)
        message = (f"compilation failed: {first['message']}" if first
                   else "compilation failed (see the compiler output)")
        return _failure_json("compile_error", message, line=first["line"] if first else None,
                             diagnostics=diagnostics, compiler_output=output[-4000:])
    return _failure_json("runtime_error", f"loading the candidate raised {text[:1000]}")


def _tamper_failures(before: dict[str, object]) -> list[dict[str, Any]]:
    return [_failure_json(code, tamper.describe(name), name=name) for code, name in tamper.changed(before)]


class _Occupier:
    """A few milliseconds of GPU-saturating work on its own (normal-priority) stream, queued
    just before forward.  Kernels forward puts on a side stream wait behind it for SMs, so when
    the current stream is done the side work has not even started and the snapshot (on a
    high-priority stream) sees it missing.  Without it, a fast side kernel can finish during the
    host's own overhead and win the race (seen on an H100 with a 16M-element kernel)."""

    def __init__(self, device: torch.device) -> None:
        self.stream = _Stream(device=device)
        with torch.cuda.stream(self.stream):
            self.a = torch.randn(OCCUPIER_SIZE, OCCUPIER_SIZE, device=device)
            self.b = torch.randn(OCCUPIER_SIZE, OCCUPIER_SIZE, device=device)
            self.c = torch.empty(OCCUPIER_SIZE, OCCUPIER_SIZE, device=device)
        self()  # cuBLAS's handle and workspace for this stream now, not after the poisoning
        torch.cuda.synchronize(device)

    def __call__(self) -> None:
        with torch.cuda.stream(self.stream):
            torch.mm(self.a, self.b, out=self.c)


OCCUPIER_NOTE = "stream check without an occupier"
OCCUPIER_ATTEMPTS = 3  # at load and before the first two checks; then the weaker check


def _note_no_occupier(notes: list[str], exc: BaseException) -> None:
    if not any(n.startswith(OCCUPIER_NOTE) for n in notes):  # one note: OOM texts vary
        notes.append(f"{OCCUPIER_NOTE}: {describe_exception(exc)[:200]}")


def _make_occupier(device: torch.device, notes: list[str]) -> _Occupier | None:
    try:
        return _Occupier(device)
    except Exception as exc:  # the stream check still runs, with a weaker guarantee
        _note_no_occupier(notes, exc)
        return None


def _ensure_occupier(state: _State) -> None:
    """Make the occupier where loading could not (GPU memory short then, e.g. beside other
    verifications): without it a fast side-stream kernel can finish before the snapshot.  (An
    unjoined side stream was accepted once on an H100 shared by six test workers, its verdict
    not kept; alone it was rejected.)"""
    if state.occupier is None and state.occupier_attempts < OCCUPIER_ATTEMPTS:
        state.occupier_attempts += 1
        _empty_cache()
        state.occupier = _make_occupier(state.device, state.notes)


def _occupy(state: _State) -> None:
    """Queue the occupier's work; a failure there drops it (with the note) instead of failing
    the candidate's check."""
    if state.occupier is None:
        return
    try:
        state.occupier()
    except Exception as exc:
        if is_cuda_fatal(exc):
            raise _Fatal(describe_exception(exc)) from exc
        state.occupier = None
        _note_no_occupier(state.notes, exc)


def _snapshot_after_current_stream(leaves: list[Any], device, stream,
                                   whole: bool) -> list[tuple[Any, Any]]:
    """Copies of each output taken as soon as the *current* stream is done, on a high-priority
    stream (tail first: a writer still running on another stream reaches the tail last; the
    whole output too where the memory plan has room)."""
    done = _Event()
    done.record(torch.cuda.current_stream(device))
    done.synchronize()
    snaps = []
    with torch.cuda.stream(stream):
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor) and leaf.is_cuda and leaf.numel():
                flat = leaf.reshape(-1)
                tail = _clone(flat[-max(TAIL_SNAPSHOT_BYTES // leaf.element_size(), 1):])
                snaps.append((tail, _clone(leaf) if whole else None))
            else:
                snaps.append((None, None))
    finished = _Event()
    finished.record(stream)
    finished.synchronize()
    return snaps


def _changed_after_return(leaves, snaps) -> bool:
    for leaf, (tail, full) in zip(leaves, snaps):
        if tail is None:
            continue
        if not _equal(as_bytes(tail), as_bytes(leaf.reshape(-1)[-tail.numel():])):
            return True
        if full is not None and not _equal(as_bytes(full), as_bytes(leaf)):
            return True
    return False


def _call(state: _State, inputs: list[Any]) -> Any:
    try:
        with torch.no_grad():
            return state.model(*inputs)
    except Exception as exc:
        if is_cuda_fatal(exc):
            raise _Fatal(describe_exception(exc)) from exc
        raise


def run_check(state: _State, case: dict[str, Any], label: str) -> dict[str, Any]:
    """One checked call: poisoned memory, fresh inputs, every output and input property."""
    with state.watch.section("checks"):
        return _run_check(state, case, label)


def _run_check(state: _State, case: dict[str, Any], label: str) -> dict[str, Any]:
    record: dict[str, Any] = {"name": f"{label}:{case['id']}", "case": case["id"],
                              "seed": case["seed"], "shapes": case.get("input_shapes"),
                              "failures": []}
    failures = record["failures"]
    _ensure_occupier(state)  # before the poisoned blocks: it may empty the allocator's cache
    dev_inputs = case_inputs(state.problem, case["seed"], case.get("shapes"), state.device,
                             case.get("transform"))
    inputs_digest = digest(dev_inputs)
    poison_allocator([m["nbytes"] for m in case["output_meta"] if m],
                     [v.numel() * v.element_size() for v in dev_inputs
                      if isinstance(v, torch.Tensor)],
                     state.device, state.plan.poison_blocks, state.plan.poison_budget_bytes)
    _occupy(state)
    try:
        out = _call(state, dev_inputs)
    except _Fatal:
        raise
    except Exception as exc:
        failures.append(_failure_json("runtime_error", f"forward raised "
                                      f"{describe_exception(exc)[:1000]}"))
        record["passed"] = False
        state.checks.append(record)
        return record
    leaves = flatten_outputs(out)
    del out
    snaps = _snapshot_after_current_stream(leaves, state.device, state.snapshot_stream,
                                           state.plan.full_snapshot)
    torch.cuda.synchronize(state.device)
    if _changed_after_return(leaves, snaps):
        failures.append(_failure_json(
            "incomplete_on_return", "outputs kept changing after the current stream finished: "
            "work was still running (on another stream or deferred) when forward returned"))
    del snaps
    _empty_cache()  # the unused poisoned blocks go back: the judge needs the room
    out_ranges = storage_ranges(leaves)
    if not state.ref_aliases and ranges_overlap(out_ranges, storage_ranges(dev_inputs)):
        failures.append(_failure_json("output_aliases_input",
                                      "an output shares memory with an input"))
    if ranges_overlap(out_ranges, [r for ref, r in state.previous if not ref.expired()]):
        failures.append(_failure_json(
            "output_reused_across_calls", "an output shares memory with the previous call's "
            "output (a returned tensor must not be overwritten by the next call)"))
    if not state.ref_mutates:
        failures += _mutated_inputs(state, case, dev_inputs)
    _empty_cache()  # the judge needs the room this process no longer uses
    failures += _judged(state, case, inputs_digest, leaves, label)
    record["passed"] = not failures
    state.previous = [(_StorageWeakRef(v.untyped_storage()), r)
                      for v, r in zip([v for v in leaves if isinstance(v, torch.Tensor)
                                       and v.numel()], out_ranges)]
    del leaves, dev_inputs
    _empty_cache()
    _ipc_collect()
    state.checks.append(record)
    return record


def _mutated_inputs(state: _State, case: dict[str, Any], dev_inputs: list[Any]) -> list[dict]:
    """In-place changes: the case's inputs generated again, compared byte for byte."""
    fresh = case_inputs(state.problem, case["seed"], case.get("shapes"), state.device,
                        case.get("transform"))
    found = [_failure_json("mutates_input", f"forward changed input {i} in place", input=i)
             for i, (before, after) in enumerate(zip(fresh, dev_inputs))
             if isinstance(before, torch.Tensor)
             and not _equal(as_bytes(before), as_bytes(after))]
    del fresh
    return found


def _judged(state: _State, case: dict[str, Any], inputs_digest: list[Any],
            leaves: list[Any], label: str) -> list[dict[str, Any]]:
    """The judge's comparison of this call's outputs with the reference's."""
    request = {"op": "compare", "case": case["id"], "inputs_digest": inputs_digest,
               "outputs": [encode_leaf(v) for v in leaves],
               "timing_settings": label == TIMING_SETTINGS_CHECK}
    try:
        reply = state.judge.ask(request)
    except (OSError, EOFError, ValueError) as exc:
        reply = {"error": f"the judge did not answer: {exc}"}
    if reply.get("error"):
        return [_failure_json("judge_error", f"the comparison could not be made: "
                              f"{str(reply['error'])[:1000]}")]
    return list(reply.get("failures") or [])


@contextlib.contextmanager
def _under_timing_settings(state: _State):
    """The settings programs are timed under (the user's: PyTorch's defaults unless `strict`),
    restored after; a setting the candidate changes meanwhile is reported, since the restore
    would otherwise hide it from the tamper check."""
    with timing_settings(state.precision):
        as_set = tamper.settings()
        try:
            yield
        finally:
            now = tamper.settings()
            state.timing_tamper += [
                _failure_json("monkeypatches_runtime", f"{tamper.describe(name)} (while timed)",
                              name=name)
                for name, value in as_set.items() if now.get(name) != value]


def _time_candidate(state: _State, sets, flush, budget_s: float) -> dict[str, Any]:
    # Under the user's settings, like the baselines.
    with state.watch.section("timing"), _under_timing_settings(state):
        return timing.time_function(lambda inputs: _call(state, inputs), sets, flush,
                                    min_runs=15, budget_s=budget_s).to_json()


def _profile_candidate(state: _State, inputs: list[Any]) -> dict[str, Any]:
    def call(_i: int) -> None:
        with torch.no_grad():
            state.model(*inputs)

    trace = profile_calls(call, 2, with_cuda=True, profiler_profile=_profile,
                          record_function=_record_function)
    calls = summarize_trace(trace)
    return {"calls": [{"index": c.index, "kernels": sorted(set(c.kernels)),
                       "own_kernels": sorted(set(c.own_kernels)),
                       "library_calls": sorted(set(c.library_calls)),
                       "own_kernel_us": {k: c.kernel_us[k] for k in set(c.own_kernels)},
                       "streams": sorted(set(c.streams)),
                       "ops": sorted({(op, ancestors) for op, ancestors in c.ops})}
                      for c in calls]}


# Recorded when this module is imported (the worker's preload, before any candidate code):
# every phase this process runs is compared with it, so a replacement made during the main
# phase is still reported by the variants phase.
_BEFORE_ANY_CANDIDATE = tamper.snapshot()
# The model the main phase loaded, by candidate path: the variants phase runs as a second task
# in the same worker (no second process start-up) and checks that same object.
_LOADED: dict[str, Any] = {}


def candidate_task(path: str, reference_path: str, module: str | None, cases: list[dict],
                   work_dir: str, phase: str = "main", device: int | None = None,
                   timing_on: bool = True, timing_seeds: list[int] | None = None,
                   ref_mutates: bool = False, ref_aliases: bool = False,
                   timing_budget_s: float = 2.0, judge: dict[str, str] | None = None,
                   memory_plan: dict[str, Any] | None = None,
                   import_fallback: str | None = None, precision: str = "fp32",
                   settings_checks: bool = False) -> dict[str, Any]:
    """`reference_path` is the verifier's read-only snapshot of the reference (snapshot.py).
    `settings_checks`: the candidate is (or, but for a static rejection, would be) timed, so
    its behaviour under the timing's settings is checked even where `timing_on` is off.
    The result's `write_attempts` are the writes outside its sandbox this process tried
    (kernelstitch.core.sandbox: refused where the write guard is enforced)."""
    add_import_fallback(import_fallback)
    result = _candidate_task(path, reference_path, module, cases, work_dir, phase, device,
                             timing_on, timing_seeds, ref_mutates, ref_aliases, timing_budget_s,
                             judge, memory_plan, precision, settings_checks)
    result["write_attempts"] = sandbox.write_attempts()
    return result


def _candidate_task(path, reference_path, module, cases, work_dir, phase, device, timing_on,
                    timing_seeds, ref_mutates, ref_aliases, timing_budget_s, judge,
                    memory_plan, precision: str = "fp32",
                    settings_checks: bool = False) -> dict[str, Any]:
    watch = Stopwatch()
    load_start = watch.now()
    inputs_before = input_generation_seconds()
    result: dict[str, Any] = {"phase": phase, "load_failure": None, "checks": [],
                              "tamper": [], "profile": None, "timing": None, "fatal": None,
                              "notes": [], "seconds": {}}
    if not torch.cuda.is_available():
        result["load_failure"] = _failure_json("runtime_error", "no CUDA device")
        return result
    if judge is None or memory_plan is None:
        result["load_failure"] = _failure_json("runtime_error", "no judge to compare against")
        return result
    dev = pick_device(device)
    precision = precision_mode(precision).name
    strict_fp32()
    before = {**_BEFORE_ANY_CANDIDATE, **tamper.settings()}  # the settings as the task set them
    problem = load_problem(Path(reference_path), module)
    model = _LOADED.get(path)
    if model is None:
        model = _load_model(path, problem, cases, work_dir, dev, result, before)
        if model is None:
            return result
        _LOADED[path] = model
    state = _State(model, problem, dev, JudgeClient(JudgeAddress.from_json(judge)),
                   MemoryPlan.from_json(memory_plan), ref_mutates, ref_aliases,
                   snapshot_stream=_Stream(device=dev, priority=-1),
                   occupier=_make_occupier(dev, result["notes"]), notes=result["notes"],
                   watch=watch,
                   precision=precision)
    watch.add_since("load", load_start)
    try:
        if phase == "variants":
            for case in cases:
                run_check(state, case, "shape")
        else:
            result["timing"] = _main_sequence(state, cases, timing_on, timing_seeds or [],
                                              timing_budget_s, result,
                                              settings_checks or timing_on)
    except _Fatal as exc:
        result["fatal"] = str(exc)[:2000]
    finally:
        state.judge.close()
    result["checks"] = state.checks
    result["tamper"] = _dedupe(result["tamper"] + state.timing_tamper + _tamper_failures(before))
    state.watch.add("of_which_inputs", input_generation_seconds() - inputs_before)
    # The stage's wall time minus this is the worker's start-up and the transfers.
    state.watch.add_since("in_task", load_start)
    result["seconds"] = state.watch.to_json()
    return result


def _load_model(path: str, problem, cases: list[dict], work_dir: str, dev: torch.device,
                result: dict[str, Any], before: dict[str, object]) -> Any | None:
    """The candidate's ModelNew on the device, or None with `result["load_failure"]` set."""
    source = Path(path).read_text(encoding="utf-8")
    namespace, failure = _import_candidate(Path(path), source)
    result["tamper"] = _tamper_failures(before)
    if failure:
        result["load_failure"] = failure
        return None
    model_class = getattr(namespace, "ModelNew", None)
    if model_class is None:
        result["load_failure"] = _failure_json("no_model_new", "the file defines no ModelNew")
        return None
    try:
        torch.manual_seed(cases[0]["seed"])
        model = model_class(*problem.get_init_inputs())
    except Exception as exc:
        result["load_failure"] = _load_failure(exc, source)
        return None
    result["notes"] += _adopt_reference_state(model, Path(work_dir) / "ref_state.pt")
    return model.to(dev)


def _main_sequence(state: _State, cases, timing_on, timing_seeds, budget_s, result,
                   settings_checks: bool = False):
    first = run_check(state, cases[0], "initial")
    timing_result = None
    flush = timing.L2Flusher(state.device) if timing_on else None

    def timed_half():
        # The input sets exist only while timing: the checks in between need the memory.
        sets = [timing_input_sets(state.problem, timing_seeds or [cases[0]["seed"]],
                                  state.device, state.plan.rotated_sets)]
        try:
            return _guarded(state, "timing", lambda: _time_candidate(state, sets[0], flush,
                                                                     budget_s / 2))
        finally:
            sets.clear()
            _empty_cache()

    if timing_on:
        timing_result = timed_half()
    else:
        warm = case_inputs(state.problem, cases[-1]["seed"], None, state.device)
        _guarded(state, "warm-up", lambda: [_call(state, warm)
                                            for _ in range(WARMUP_CALLS_WITHOUT_TIMING)])
        del warm
    for case in cases[1:]:
        run_check(state, case, "after_warmup")
    if timing_on and timing_result is not None:
        second = timed_half()
        timing_result = ({k: timing_result[k] + second[k] for k in timing_result}
                         if second else None)

    recheck = run_check(state, cases[0], "recheck")
    if first["passed"] and not recheck["passed"]:
        recheck["failures"].insert(0, _failure_json(
            "behaviour_changes_after_warmup", f"seed {cases[0]['seed']} passed on the first "
            "call but fails after warm-up and timing runs"))
    # timed under other settings than checked (PyTorch's defaults): a check and two profiled
    # calls under them too, also where a static rejection skipped the timing (the dynamic
    # checks then still say what the program does when timed)
    timed_otherwise = settings_checks and not precision_mode(state.precision).timed_tf32_off
    if timed_otherwise:
        _check_under_timing_settings(state, cases)
    inputs = case_inputs(state.problem, cases[0]["seed"], None, state.device)
    try:
        with state.watch.section("profile"):
            result["profile"] = _profile_candidate(state, inputs)
            if timed_otherwise:
                # what it runs under the timing's settings must be its own work too (a program
                # calling the reference's ops only while timed would pass the output checks)
                with _under_timing_settings(state):
                    timed = _profile_candidate(state, inputs)
                offset = len(result["profile"]["calls"])
                result["profile"]["calls"] += [{**c, "index": offset + c["index"]}
                                               for c in timed["calls"]]
    except _Fatal:
        raise
    except Exception as exc:
        result["notes"].append(f"profiling failed: {describe_exception(exc)[:300]}")
    return timing_result


def _check_under_timing_settings(state: _State, cases) -> None:
    """Timing runs under PyTorch's defaults (cuDNN TF32 allowed), the checks in strict fp32: one
    check under the timing's settings fails a candidate that reads those flags to skip work while
    timed.  On a plain seed case (a stress case's inputs are beyond what TF32 is judged on)."""
    case = [c for c in cases if not c.get("transform")][-1]

    def checked():
        with _under_timing_settings(state):
            return run_check(state, case, TIMING_SETTINGS_CHECK)

    # entering the settings can fail (a candidate left them unreadable): a failed check, as any
    timed = _guarded(state, TIMING_SETTINGS_CHECK, checked)
    if timed is None:
        return
    failures = timed["failures"]
    if (failures and not any(f["code"] == "judge_error" for f in failures)
            and all(c["passed"] for c in state.checks if c is not timed)):
        failures.insert(0, _failure_json(
            "behaviour_changes_when_timed", f"seed {case['seed']} passes in strict fp32 but fails "
            "under PyTorch's default settings (cuDNN TF32 allowed), the settings it is timed "
            "under, beyond the error those settings give the original"))


def _guarded(state: _State, what: str, action):
    """Run warm-up/timing calls; a failure there is recorded as a failed check, not lost."""
    try:
        return action()
    except _Fatal:
        raise
    except Exception as exc:
        state.checks.append({"name": f"{what}:calls", "case": None, "seed": None,
                             "shapes": None, "passed": False, "failures": [_failure_json(
                                 "runtime_error", f"forward raised during {what}: "
                                 f"{describe_exception(exc)[:800]}")]})
        return None


def _adopt_reference_state(model, state_path: Path) -> list[str]:
    reference = torch.load(state_path, weights_only=False)
    own = model.state_dict()
    if set(own) == set(reference) and all(
        tuple(own[k].shape) == tuple(reference[k].shape) for k in own
    ):
        if own:
            model.load_state_dict(reference, strict=True)
            return ["parameters loaded from the reference (names match)"]
        return []
    return ["the candidate's parameter names differ from the reference's: it was built with "
            "the same seed instead"]


def _dedupe(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, kept = set(), []
    for item in items:
        key = (item["code"], item["message"])
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept
