"""kernelstitch.core.cuda_timing on CPU: the order of a timed span's calls and its arithmetic
(with fake events and a fake clock), and which callables are bound when (the verifier's
tamper resistance).  The same helper on a real GPU: test_cuda_timing_gpu.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelstitch.core.cuda_timing import BoundCuda, CudaTimer, Span, bind_cuda


class FakeCuda:
    """A fake clock in seconds: each call of the timed function takes 2 ms of GPU time, the
    device-wide synchronisation after the end event 0.5 ms more (hidden work)."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.log: list[str] = []
        self.created = 0
        self.pending_hidden = 0.0

    def bound(self) -> BoundCuda:
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                fake.created += 1
                self.name = "start" if fake.created % 2 else "end"
                self.at: float | None = None

        def record(event):
            fake.log.append(f"record {event.name}")
            event.at = fake.clock

        def elapsed(start, end):
            fake.log.append("elapsed")
            return (end.at - start.at) * 1e3

        def event_sync(event):
            fake.log.append(f"sync {event.name}")

        def device_sync():
            fake.log.append("device sync")
            fake.clock += fake.pending_hidden
            fake.pending_hidden = 0.0

        def now():
            return fake.clock

        return BoundCuda(Event, record, elapsed, event_sync, device_sync, now)

    def fn(self, *args):
        self.log.append(f"fn{args}")
        self.clock += 2e-3
        self.pending_hidden = 0.5e-3
        return object()


def test_a_span_flushes_idles_brackets_and_measures_the_leftover():
    fake = FakeCuda()
    timer = CudaTimer(fake.bound())
    span = timer.span(fake.fn, 7, flush=lambda: fake.log.append("flush"))
    assert fake.log == ["flush", "device sync", "record start", "fn(7,)", "record end",
                        "sync end", "device sync", "elapsed"]
    assert span == Span(gpu_ms=pytest.approx(2.0), wall_ms=pytest.approx(2.5),
                        unaccounted_ms=pytest.approx(0.5))


def test_repeat_reports_per_call_times_and_reuses_one_pair_of_events():
    fake = FakeCuda()
    timer = CudaTimer(fake.bound())
    span = timer.span(fake.fn, repeat=4)
    assert fake.log.count("fn()") == 4 and "flush" not in fake.log
    assert span.gpu_ms == pytest.approx(2.0) and span.wall_ms == pytest.approx(8.5 / 4)
    assert span.unaccounted_ms == pytest.approx(0.5)
    timer.span(fake.fn)
    assert fake.created == 2
    with pytest.raises(ValueError):
        timer.span(fake.fn, repeat=0)


def test_samples_warm_up_then_synchronise_then_time_each_run():
    fake = FakeCuda()
    timer = CudaTimer(fake.bound())
    samples = timer.samples_ms(fake.fn, "x", runs=5, warmup=3)
    assert samples == pytest.approx([2.0] * 5)
    assert fake.log[:4] == ["fn('x',)"] * 3 + ["device sync"]
    assert fake.log.count("record start") == 5


def test_bind_cuda_keeps_what_was_there_when_called(monkeypatch):
    torch = pytest.importorskip("torch")
    original = torch.cuda.Event.elapsed_time
    bound = bind_cuda()
    assert bound.elapsed is original and bound.event is torch.cuda.Event
    assert bound.record is torch.cuda.Event.record
    assert bound.event_sync is torch.cuda.Event.synchronize
    assert bound.device_sync is torch.cuda.synchronize

    def fake(self, end):
        return 0.001

    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", fake)
    assert bound.elapsed is original  # bound before the patch: unaffected
    assert bind_cuda().elapsed is fake  # bound after it: the check above is not vacuous


def test_the_verifiers_timing_binds_at_import_before_any_candidate(monkeypatch):
    torch = pytest.importorskip("torch")
    import time

    from kernelstitch.agents.verifier import timing

    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.001)
    monkeypatch.setattr(torch.cuda.Event, "record", lambda self, stream=None: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    bound = timing._CUDA
    assert bound.elapsed is not torch.cuda.Event.elapsed_time
    assert bound.record is not torch.cuda.Event.record
    assert bound.device_sync is not torch.cuda.synchronize
    assert bound.now is not time.perf_counter
    assert timing._device_sync is bound.device_sync and timing._now is bound.now


def test_time_function_keeps_its_protocol_on_the_shared_span(monkeypatch):
    """The verifier's statistics: a timed warm-up sets the run count (at least min_runs), input
    sets rotate, one flush per run, samples and unaccounted times per run."""
    pytest.importorskip("torch")
    from kernelstitch.agents.verifier import timing

    fake = FakeCuda()
    bound = fake.bound()
    monkeypatch.setattr(timing, "_CUDA", bound)
    monkeypatch.setattr(timing, "_device_sync", bound.device_sync)
    monkeypatch.setattr(timing, "_now", bound.now)
    flushes = []
    result = timing.time_function(lambda inputs: fake.fn(*inputs), [["a"], ["b"]],
                                  lambda: flushes.append(1), min_runs=4, budget_s=0.0)
    warm = timing.WARMUP_S / 2.5e-3  # each warm-up call: 2 ms + 0.5 ms hidden, synchronised
    calls = [entry for entry in fake.log if entry.startswith("fn")]
    assert len(calls) - 4 in (int(warm), int(warm) + 1)  # float rounding of the clock
    assert len(result.samples_ms) == len(flushes) == 4
    assert calls[-4:] == ["fn('a',)", "fn('b',)", "fn('a',)", "fn('b',)"]
    assert result.samples_ms == pytest.approx([2.0] * 4)
    assert result.unaccounted_ms == pytest.approx([0.5] * 4)


def test_importing_the_helper_does_not_import_torch():
    code = ("import sys, kernelstitch.core.cuda_timing; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
