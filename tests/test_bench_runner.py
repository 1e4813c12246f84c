"""The real runner's wiring with the pipeline and worker processes replaced by recorders:
which GPU each worker gets, build failures, profile arithmetic, the LLM coder's GPU phase."""

import threading
from pathlib import Path

import pytest
from bench_fakes import spec_for, write_problem
from kernelstitch.agents.job_protocol import JobResult

from kernelstitch.bench import tasks as bench_tasks
from kernelstitch.bench.outcome import ProblemOutcome
from kernelstitch.bench.phases import PhaseContext, Prepared
from kernelstitch.bench.runner import (
    BUILD_TASK,
    MEASURE_TASK,
    PROFILE_TASK,
    PipelineRunner,
)
from kernelstitch.bench.settings import BenchSettings
from kernelstitch.core.worker.protocol import Response, WorkerError
from kernelstitch.core.workspace import Workspace


class FakeWorkers:
    """Stands in for WorkerClient; `answers[task]` is the Response a call gets."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []  # (task, args, cuda_device, env)

    def __call__(self, cuda_device=None, env=None, **_kwargs):
        workers = self

        class Client:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def call(self, task, args, timeout_s, cancel=None):
                assert timeout_s > 0 and isinstance(cancel, threading.Event)
                workers.calls.append((task, args, cuda_device, env or {}))
                answer = workers.answers[task]
                return answer(args) if callable(answer) else answer

        return Client()


def ok(result):
    return Response(id=1, ok=True, result=result)


def failure(kind, message, **details):
    return Response(id=1, ok=False, error=WorkerError(kind=kind, message=message, **details))


VERDICT = {"status": "accepted", "reasons": [], "device": "NVIDIA H100", "timings": {
    "eager_ms": {"median": 2.0, "p10": 1.9, "p90": 2.2, "n": 40},
    "compiled_ms": {"median": 1.6, "p10": 1.5, "p90": 1.7, "n": 40},
    "candidate_ms": {"median": 1.0, "p10": 0.95, "p90": 1.1, "n": 40},
    "speedup_vs_eager": 2.0, "speedup_vs_compiled": 1.6, "significant_vs_eager": True,
    "significant_vs_compiled": True}}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    from kernelstitch.agents import pipeline

    from kernelstitch.core.worker import client

    spec = spec_for(write_problem(tmp_path / "1_relu.py"))
    candidate = tmp_path / "model_new.py"
    candidate.write_text("# candidate\n")
    calls = {"generate": [], "verify": [], "choose": []}

    def fake_generate(source, module, workspace, config, emit, cancel):
        calls["generate"].append(config)
        return JobResult(status="succeeded", message="candidate written", kind="generate",
                         source_path=str(source), module="Model", candidate_path=str(candidate),
                         plan={"steps": [{"technique": "fused_elementwise"}]},
                         verdict=VERDICT if config.verify else None)

    def fake_verify(source, module, candidate_path, workspace, config, emit, cancel):
        calls["verify"].append((candidate_path, config))
        return JobResult(status="succeeded", message="accepted: 2.00x vs eager", kind="verify",
                         source_path=str(source), module="Model", verdict=VERDICT)

    def fake_choose(source, module, workspace, config, emit, cancel):
        calls["choose"].append(config)
        stat = {"median": 1.0, "p10": 0.9, "p90": 1.1, "n": 30}
        return JobResult(status="succeeded", message="accepted: 2.00x vs eager", kind="verify",
                         source_path=str(source), module="Model", verdict=VERDICT,
                         selection={"decision": "deliver", "winner": "nchw",
                                    "original_ms": {**stat, "median": 2.0},
                                    "variants": [{"name": "nchw", "reason": "r",
                                                  "time_ms": stat}]})

    monkeypatch.setattr(pipeline, "run_generate", fake_generate)
    monkeypatch.setattr(pipeline, "run_verify", fake_verify)
    monkeypatch.setattr(pipeline, "run_choose", fake_choose)
    workers = FakeWorkers({BUILD_TASK: ok({"built": True, "seconds": 41.0}),
                           PROFILE_TASK: ok({"floor_ms": 0.5, "actual_ms": 2.0,
                                             "bound": "memory"})})
    monkeypatch.setattr(client, "WorkerClient", workers)
    return spec, candidate, calls, workers, Workspace(tmp_path)


def ctx(device=2):
    return PhaseContext(device=device, cancel=threading.Event(), time_left_s=100.0)


def test_prepare_generates_without_verifying_and_prebuilds_on_the_given_gpu(setup):
    spec, candidate, calls, workers, ws = setup
    prepared = PipelineRunner(ws, BenchSettings(build_jobs=2)).prepare(spec, ctx(device=2))
    assert prepared.done is None and prepared.compiled is True
    assert prepared.candidate_path == str(candidate)
    assert prepared.plan_steps == ["fused_elementwise"]
    (config,) = calls["generate"]
    assert config.verify is False and config.coder == "builtin"
    ((task, args, device, env),) = workers.calls
    assert task == BUILD_TASK and args["path"] == str(candidate) and args["jobs"] >= 1
    assert device == 2  # WorkerClient exports CUDA_VISIBLE_DEVICES=2


def test_a_lone_prepare_builds_with_every_core_and_concurrent_ones_share_them(setup):
    """The jobs of a build (its MAX_JOBS): the runner's cores over the problems preparing at that
    moment (a fixed cores // --build-jobs left a one-GPU run's only build one compiler process)."""
    from kernelstitch.bench.runner import CoreShare

    spec, _, _, workers, ws = setup
    PipelineRunner(ws, BenchSettings(build_jobs=14), cores=16).prepare(spec, ctx())
    ((_, args, _, _),) = workers.calls
    assert args["jobs"] == 16
    share = CoreShare(16)
    for _ in range(3):
        share.enter()
    assert share.jobs() == 5  # 16 cores, 3 problems preparing
    share.leave()
    share.leave()
    assert share.jobs() == 16
    share.leave()
    share.leave()  # never below none
    assert share.jobs() == 16 and CoreShare(2).jobs() == 2


def test_build_failure_is_a_rejected_problem_with_the_compiler_output(setup):
    spec, _, _, workers, ws = setup
    workers.answers[BUILD_TASK] = ok({"error": True, "message": "compilation failed: boom",
                                      "output": "x.cu(3): error: boom\n" * 3})
    prepared = PipelineRunner(ws, BenchSettings()).prepare(spec, ctx())
    done = prepared.done
    assert done is not None and done.status == "rejected" and done.reasons == ["compile_error"]
    assert done.compiled is False and "x.cu(3): error: boom" in done.compile_message
    assert done.message == "compilation failed: boom"


def test_a_crashing_build_worker_is_a_compile_failure_but_a_cancel_is_not(setup):
    spec, _, _, workers, ws = setup
    workers.answers[BUILD_TASK] = failure("crash", "the worker died", stderr_tail="nvcc: killed")
    crashed = PipelineRunner(ws, BenchSettings()).prepare(spec, ctx())
    assert crashed.done.compiled is False and "nvcc: killed" in crashed.done.compile_message
    workers.answers[BUILD_TASK] = failure("cancelled", "cancelled")
    cancelled = PipelineRunner(ws, BenchSettings()).prepare(spec, ctx())
    assert cancelled.done is None and cancelled.compiled is None  # the phase records it


def test_no_gpu_for_the_build_is_noted_not_failed(setup):
    spec, _, _, workers, ws = setup
    workers.answers[BUILD_TASK] = ok({"skipped": "no CUDA GPU visible to the build worker"})
    prepared = PipelineRunner(ws, BenchSettings()).prepare(spec, ctx())
    assert prepared.done is None and prepared.compiled is None
    assert prepared.notes == ["not pre-built: no CUDA GPU visible to the build worker"]


def test_measure_verifies_the_candidate_and_profiles_for_the_roofline(setup):
    spec, candidate, calls, workers, ws = setup
    runner = PipelineRunner(ws, BenchSettings(profile=True, seeds=4, timing_budget_s=0.5,
                                              search=False))
    prepared = runner.prepare(spec, ctx(device=0))
    outcome = runner.measure(prepared, ctx(device=None))  # in this process
    assert calls["choose"] == []
    ((path, config),) = calls["verify"]
    assert path == str(candidate)
    assert config.device is None and config.verify and config.timing and config.seeds == 4
    assert config.timing_budget_s == 0.5
    assert outcome.status == "accepted" and outcome.speedup_vs_eager == 2.0
    assert outcome.eager_spread_ms == [1.9, 2.2] and outcome.compiled is True
    profile_calls = [c for c in workers.calls if c[0] == PROFILE_TASK]
    assert [c[2] for c in profile_calls] == [None]  # inherits the (pinned) GPU
    assert outcome.roofline_fraction == pytest.approx(0.5)  # floor 0.5 ms / ours 1.0 ms
    assert outcome.roofline_fraction_eager == pytest.approx(0.25)  # floor / eager's 2.0 ms


def test_with_the_search_measure_chooses_among_the_prepared_variants(setup):
    spec, _, calls, workers, ws = setup
    runner = PipelineRunner(ws, BenchSettings(seeds=4))
    prepared = runner.prepare(spec, ctx(device=0))
    assert calls["generate"][0].search and not calls["generate"][0].verify  # codes variants
    outcome = runner.measure(prepared, ctx(device=None))
    assert calls["verify"] == [] and len(calls["choose"]) == 1
    assert outcome.status == "accepted" and outcome.delivered == "ours:nchw"
    assert outcome.variants_ms == {"original": 2.0, "nchw": 1.0}


def test_measure_on_a_gpu_runs_the_phase_in_a_worker_pinned_to_it(setup):
    spec, _, calls, workers, ws = setup
    runner = PipelineRunner(ws, BenchSettings(seeds=5))
    prepared = runner.prepare(spec, ctx(device=0))
    answer = ProblemOutcome(problem=spec.name, status="accepted", message="ok",
                            speedup_vs_eager=3.0, cuda_visible_devices="3")
    workers.answers[MEASURE_TASK] = ok(answer.to_json())
    outcome = runner.measure(prepared, ctx(device=3))
    ((_task, args, device, _env),) = [c for c in workers.calls if c[0] == MEASURE_TASK]
    assert device == 3  # CUDA_VISIBLE_DEVICES=3 for the phase and every process it starts
    assert Prepared.from_json(args["prepared"]) == prepared  # the prepared state travels
    assert args["settings"]["seeds"] == 5 and args["workspace"] == str(ws.root)
    assert calls["verify"] == []  # nothing measured in this process
    assert outcome == answer

    workers.answers[MEASURE_TASK] = failure("crash", "the worker died", stderr_tail="boom")
    crashed = runner.measure(prepared, ctx(device=3))
    assert crashed.status == "failed" and crashed.message.startswith("harness error")
    assert "boom" in crashed.message


def test_without_profile_the_roofline_stays_unknown(setup):
    spec, _, _, workers, ws = setup
    runner = PipelineRunner(ws, BenchSettings())
    outcome = runner.measure(runner.prepare(spec, ctx()), ctx(device=None))
    assert outcome.roofline_fraction is None
    assert not [c for c in workers.calls if c[0] == PROFILE_TASK]


def test_failed_profile_leaves_a_note_and_no_number(setup):
    spec, _, _, workers, ws = setup
    workers.answers[PROFILE_TASK] = ok({"error": "no GPU kernels were seen"})
    runner = PipelineRunner(ws, BenchSettings(profile=True))
    outcome = runner.measure(runner.prepare(spec, ctx()), ctx(device=None))
    assert outcome.roofline_fraction is None
    assert outcome.notes == ["profile failed: no GPU kernels were seen"]


def test_llm_coder_generates_in_the_gpu_phase(setup):
    spec, _, calls, workers, ws = setup
    runner = PipelineRunner(ws, BenchSettings(coder="llm", llm={"model": "m"}))
    prepared = runner.prepare(spec, ctx())
    assert prepared.generate_on_gpu and calls["generate"] == [] and workers.calls == []
    outcome = runner.measure_here(prepared, ctx(device=None))
    (config,) = calls["generate"]
    assert config.coder == "llm" and config.verify
    assert config.llm == {"model": "m"}
    assert outcome.status == "accepted" and outcome.plan_steps == ["fused_elementwise"]


def test_build_failure_message_points_at_the_compiler_error(tmp_path):
    candidate = tmp_path / "model_new.py"
    candidate.write_text("x = 1\n")
    output = ("ninja: build stopped\n"
              f"{tmp_path}/build/cuda.cu(12): error: identifier \"foo\" is undefined\n")
    cause = RuntimeError(output)
    try:
        raise RuntimeError("Error building extension 'ks_0123'") from cause
    except RuntimeError as exc:
        info = bench_tasks._build_failure(exc, candidate)
    assert info["message"].startswith("compilation failed")
    assert 'identifier "foo" is undefined' in info["message"]
    assert info["output"] == output
    other = bench_tasks._build_failure(ValueError("bad flags"), candidate)
    assert other["message"] == "building the extension raised ValueError: bad flags"


def test_the_stage_clock_splits_prepare_time_at_each_new_stage():
    from kernelstitch.bench.runner import StageClock

    now = [0.0]
    clock = StageClock(lambda: now[0])
    for t, stage in [(0.5, "planning"), (4.0, "planning"), (6.5, "coding"), (7.0, "coding"),
                     (9.0, "reporting"), (9.5, "build")]:
        now[0] = t
        clock.enter(stage)
    now[0] = 30.0
    assert clock.stop() == {"planning": 6.0, "coding": 2.5, "reporting": 0.5, "build": 20.5}


def test_prepare_stages_are_reported_beside_the_verifier_stages():
    from kernelstitch.bench.metrics import stage_times
    from kernelstitch.bench.outcome import ProblemOutcome

    outcomes = [ProblemOutcome(problem=f"p{i}", status="accepted", message="",
                               prepare_stage_s={"planning": 2.0 * i, "build": 10.0},
                               verify_stage_s={"reference": 1.0}) for i in (1, 2, 3)]
    group = stage_times(outcomes)["all"]
    assert group["verify_stage_s"]["prepare.planning"] == [4.0, 3]
    assert group["verify_stage_s"]["prepare.build"] == [10.0, 3]
    assert list(group["verify_stage_s"])[-1] == "reference"
    again = ProblemOutcome.from_json(outcomes[0].to_json())
    assert again.prepare_stage_s == {"planning": 2.0, "build": 10.0}


def test_each_variant_build_asks_for_the_core_share_at_its_start(setup, tmp_path):
    """A problem's variants build one after another: each build takes the share of the moment
    (the cores over the problems preparing then), so one that starts after the other problems
    finished gets every core (the share taken once kept a group_norm problem's four builds on
    one or two)."""
    spec, candidate, _, workers, ws = setup
    for name in ("gn-stats", "nchw"):
        folder = Path(candidate).parent / "variants" / name
        folder.mkdir(parents=True)
        (folder / "model_new.py").write_text("# a variant\n")
    runner = PipelineRunner(ws, BenchSettings(build_jobs=14, search=True), cores=16)
    for _ in range(3):  # three other problems preparing when this one starts
        runner.cores.enter()
    shares = iter([1, 2, 0])  # the others finishing while this one's builds run

    def answer(args):
        for _ in range(next(shares)):
            runner.cores.leave()
        return ok({"built": True, "seconds": 1.0})

    workers.answers[BUILD_TASK] = answer
    runner.prepare(spec, ctx())
    assert [args["jobs"] for _, args, _, _ in workers.calls] == [4, 5, 16]


def test_the_build_task_sets_the_jobs_it_was_given(tmp_path, monkeypatch):
    """The worker's build reads MAX_JOBS (the generated _build_extension): the task sets it from
    its `jobs` argument, at least one, before anything else (here: no GPU, the build skipped)."""
    monkeypatch.setenv("MAX_JOBS", "1")
    bench_tasks.build_candidate(str(tmp_path / "model_new.py"), jobs=6)
    assert bench_tasks.os.environ["MAX_JOBS"] == "6"
    bench_tasks.build_candidate(str(tmp_path / "model_new.py"), jobs=0)
    assert bench_tasks.os.environ["MAX_JOBS"] == "1"
    monkeypatch.setenv("MAX_JOBS", "9")
    bench_tasks.build_candidate(str(tmp_path / "model_new.py"))  # no jobs: the worker's own
    assert bench_tasks.os.environ["MAX_JOBS"] == "9"
