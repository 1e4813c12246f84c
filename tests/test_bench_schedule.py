"""The local scheduler and the per-problem time limit, with a fake runner (no pipeline, no GPU)."""

import itertools
import threading
import time

from bench_fakes import Behaviour, FakeRunner, max_overlap, spec_for, write_problem

from kernelstitch.bench.phases import evaluate_problem
from kernelstitch.bench.schedule import LocalScheduler


def make_specs(tmp_path, count):
    return [spec_for(write_problem(tmp_path / f"{i}_p.py", scale=i + 1)) for i in range(count)]


def run(runner, specs, devices=(None,), build_jobs=2, limit=30.0, stop=None, events=None):
    scheduler = LocalScheduler(runner, list(devices), build_jobs, limit,
                               on_event=(events.append if events is not None else None), stop=stop)
    return scheduler.run(specs)


def test_measurements_never_share_a_gpu_and_use_every_gpu(tmp_path):
    specs = make_specs(tmp_path, 12)
    runner = FakeRunner(default=Behaviour(prepare_s=0.01, measure_s=0.2))
    outcomes = run(runner, specs, devices=[0, 1, 2], build_jobs=6)

    assert [o.problem for o in outcomes] == [s.name for s in specs]  # input order kept
    assert sorted(m.problem for m in runner.measures) == sorted(s.name for s in specs)
    for device in (0, 1, 2):
        on_gpu = sorted((m for m in runner.measures if m.device == device), key=lambda m: m.start)
        assert on_gpu, f"GPU {device} was never used"
        for before, after in itertools.pairwise(on_gpu):
            assert before.end <= after.start, f"two measurements overlapped on GPU {device}"
    assert 2 <= max_overlap(runner.measures) <= 3  # the GPUs did work in parallel
    by_name = {m.problem: m.device for m in runner.measures}
    assert all(o.gpu == by_name[o.problem] for o in outcomes)  # outcome says where it ran


def test_prepare_runs_build_jobs_problems_at_once(tmp_path):
    specs = make_specs(tmp_path, 8)
    # Long enough that all four start before the first ends, even on a busy 2-core machine.
    runner = FakeRunner(default=Behaviour(prepare_s=0.6, measure_s=0.01))
    run(runner, specs, build_jobs=4)
    assert max_overlap(runner.prepares) == 4

    serial = FakeRunner(default=Behaviour(prepare_s=0.05, measure_s=0.01))
    run(serial, specs[:4], build_jobs=1)
    assert max_overlap(serial.prepares) == 1


def test_measuring_starts_while_others_still_prepare(tmp_path):
    specs = make_specs(tmp_path, 4)
    runner = FakeRunner(default=Behaviour(prepare_s=0.4, measure_s=0.01))
    run(runner, specs, build_jobs=1)
    first_measure = min(m.start for m in runner.measures)
    last_prepare_end = max(p.end for p in runner.prepares)
    assert first_measure < last_prepare_end


def test_problem_over_its_time_limit_is_cancelled_and_recorded_as_timeout(tmp_path):
    specs = make_specs(tmp_path, 3)
    runner = FakeRunner(behaviours={
        specs[0].name: Behaviour(hang_in="measure"),
        specs[1].name: Behaviour(hang_in="prepare"),
    })
    start = time.monotonic()
    outcomes = run(runner, specs, limit=1.0)
    assert time.monotonic() - start < 20  # not the fake's 30 s hang
    hung_measure, hung_prepare, fine = outcomes
    assert hung_measure.status == "timeout" and "during measure" in hung_measure.message
    assert "1 s time limit" in hung_measure.message
    assert hung_prepare.status == "timeout" and "during prepare" in hung_prepare.message
    assert fine.status == "accepted"
    cancelled = {i.problem for i in runner.measures + runner.prepares if i.cancelled}
    assert cancelled == {specs[0].name, specs[1].name}  # the runner saw its cancel Event
    assert specs[1].name not in {m.problem for m in runner.measures}  # never measured
    assert hung_measure.compiled is True and hung_measure.plan_steps  # prepare's facts kept
    # A timeout reports no numbers, although the (fake) measurement returned some.
    assert (hung_measure.candidate_ms, hung_measure.eager_ms, hung_measure.speedup_vs_eager) \
        == (None, None, None)


def test_time_queued_for_a_gpu_does_not_count_against_the_limit(tmp_path):
    specs = make_specs(tmp_path, 3)
    runner = FakeRunner(default=Behaviour(prepare_s=0.01, measure_s=0.4))
    outcomes = run(runner, specs, devices=[0], build_jobs=3, limit=1.0)
    # Each needs ~0.4 s of its 1 s; the last one also waited ~0.8 s for the GPU.
    assert [o.status for o in outcomes] == ["accepted"] * 3


def test_build_failure_is_recorded_and_skips_measurement(tmp_path):
    specs = make_specs(tmp_path, 2)
    runner = FakeRunner(behaviours={specs[0].name: Behaviour(build_fails=True)})
    broken, fine = run(runner, specs)
    assert broken.status == "rejected" and broken.compiled is False
    assert broken.reasons == ["compile_error"] and broken.compile_message == "error: x"
    assert [m.problem for m in runner.measures] == [specs[1].name]
    assert fine.status == "accepted"


def test_a_runner_exception_fails_only_that_problem(tmp_path):
    specs = make_specs(tmp_path, 3)
    runner = FakeRunner(behaviours={specs[0].name: Behaviour(raise_in="prepare"),
                                    specs[1].name: Behaviour(raise_in="measure")})
    outcomes = run(runner, specs, devices=[0, 1])
    assert [o.status for o in outcomes] == ["failed", "failed", "accepted"]
    assert outcomes[0].message.startswith("harness error: RuntimeError: fake prepare bug")
    assert "fake measure bug" in outcomes[1].message


def test_stop_cancels_running_and_waiting_problems(tmp_path):
    specs = make_specs(tmp_path, 4)
    runner = FakeRunner(default=Behaviour(hang_in="measure"))
    stop = threading.Event()
    # Ctrl-C once the first problem is measuring (not after a fixed delay: a busy machine may
    # not have started measuring by then).
    stopper = threading.Thread(target=lambda: runner.measure_started.wait(20) and stop.set(),
                               daemon=True)
    stopper.start()
    start = time.monotonic()
    outcomes = run(runner, specs, devices=[0], build_jobs=4, stop=stop)
    stopper.join(5)
    assert stop.is_set() and time.monotonic() - start < 20
    assert {o.status for o in outcomes} == {"cancelled"}
    assert len(runner.measures) == 1  # queued problems were not started after the stop


def test_events_report_each_phase_and_one_done_per_problem(tmp_path):
    specs = make_specs(tmp_path, 3)
    events = []
    run(FakeRunner(), specs, devices=[0, 1], events=events)
    for spec in specs:
        phases = [e.phase for e in events if e.problem == spec.name]
        assert phases == ["prepare", "measure", "done"]
    assert all(e.outcome is not None for e in events if e.phase == "done")


def test_evaluate_problem_runs_both_phases_under_one_limit(tmp_path):
    spec = make_specs(tmp_path, 1)[0]
    ok = evaluate_problem(FakeRunner(), spec, 3, 30.0)
    assert ok.status == "accepted" and ok.gpu == 3 and ok.compiled is True
    assert ok.prepare_s is not None and ok.measure_s is not None and ok.time_limit_s == 30.0
    slow = FakeRunner(default=Behaviour(prepare_s=0.1, measure_s=2.0))
    late = evaluate_problem(slow, spec, None, 0.6)  # prepare fits, the rest of the limit not
    assert late.status == "timeout" and "during measure" in late.message


class _KilledOnTimeout(FakeRunner):
    """A runner whose worker dies (and raises) when the time limit cancels it."""

    def prepare(self, spec, ctx):
        ctx.cancel.wait(30)
        raise RuntimeError("the worker was killed")


class _LateVerdict(FakeRunner):
    """The verdict comes back 'accepted', with timings, just after the limit ran out."""

    def measure(self, prepared, ctx):
        ctx.cancel.wait(30)
        return super().measure(prepared, ctx)


def test_a_problem_interrupted_by_its_limit_is_a_timeout_without_numbers(tmp_path):
    from kernelstitch.bench import resume
    from kernelstitch.core.runstore import RunStore

    spec = make_specs(tmp_path, 1)[0]
    killed = evaluate_problem(_KilledOnTimeout(), spec, None, 0.3)
    assert killed.status == "timeout" and "during prepare" in killed.message  # not a "failed"
    late = evaluate_problem(_LateVerdict(), spec, None, 0.3)
    assert late.status == "timeout" and not late.correct
    assert all(getattr(late, name) is None for name in (
        "eager_ms", "candidate_ms", "speedup_vs_eager", "speedup_vs_compiled", "eager_spread_ms"))
    # Stored as a timeout (reused only under a limit that is not longer), never as accepted.
    store = RunStore(tmp_path / "runs.sqlite")
    resume.record(store, spec, "k", late)
    assert resume.lookup(store, "k", 0.3).status == "timeout"
    assert resume.lookup(store, "k", 60.0) is None
    stopped = threading.Event()
    stopped.set()
    cancelled = evaluate_problem(FakeRunner(), spec, None, 30.0, stop=stopped)
    resume.record(store, spec, "c", cancelled)
    assert cancelled.status == "cancelled" and resume.lookup(store, "c", 30.0) is None


def test_a_timeout_never_cancels_the_problems_queued_behind_it(tmp_path):
    """One GPU, the first problem in the measure queue runs into its limit (a runner that also
    takes a while to stop): every problem queued behind it is still measured and accepted."""
    specs = make_specs(tmp_path, 5)

    class _SlowToStop(FakeRunner):
        def measure(self, prepared, ctx):
            if prepared.spec.name == specs[0].name:
                ctx.cancel.wait(30)
                time.sleep(0.5)  # cleaning up after the cancel
            return super().measure(prepared, ctx)

    runner = _SlowToStop(behaviours={s.name: Behaviour(prepare_s=0.3)
                                     for s in specs[1:]},
                         default=Behaviour(prepare_s=0.01))
    outcomes = run(runner, specs, devices=[None], build_jobs=5, limit=1.0)
    assert outcomes[0].status == "timeout" and "during measure" in outcomes[0].message
    assert [o.status for o in outcomes[1:]] == ["accepted"] * 4
    assert [m.problem for m in runner.measures][0] == specs[0].name  # it was first in line
