"""kernelstitch.core.cuda_timing on a real GPU, and the verifier's timing unmoved by a
candidate that patches torch.cuda.Event.elapsed_time after the verifier was imported."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

FAKE_MS = 12345.0


def _work():
    x = torch.randn(4096, 4096, device="cuda")
    return lambda: x @ x


def test_a_real_kernel_takes_positive_time():
    from kernelstitch.core.cuda_timing import CudaTimer

    fn = _work()
    timer = CudaTimer()
    span = timer.span(fn, repeat=3)
    assert span.gpu_ms > 0 and span.wall_ms > 0 and span.unaccounted_ms >= 0
    samples = timer.samples_ms(fn, runs=5)
    assert len(samples) == 5 and all(s > 0 for s in samples)


def test_patching_elapsed_time_after_import_does_not_fake_the_verifiers_timing(monkeypatch):
    from kernelstitch.agents.verifier import timing

    from kernelstitch.core.cuda_timing import CudaTimer

    fn = _work()
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: FAKE_MS)
    assert CudaTimer().span(fn).gpu_ms == FAKE_MS  # a timer bound now would be fooled
    flush = timing.L2Flusher(torch.device("cuda"))
    result = timing.time_function(lambda inputs: fn(), [[]], flush, min_runs=5, budget_s=0.05)
    assert len(result.samples_ms) >= 5
    assert all(0 < s < FAKE_MS for s in result.samples_ms), result.samples_ms
