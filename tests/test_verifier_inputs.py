"""Verifier speed-ups that must not change what is checked: case inputs cached per worker, stage timing, workers started ahead of their task (CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.inputs import CaseInputCache, seeded_inputs, to_device
from kernelstitch.agents.verifier.stopwatch import Stopwatch


class _Problem:
    """The two methods the cache uses, counting how often inputs are generated."""

    def __init__(self) -> None:
        self.calls = 0

    def inputs(self):
        self.calls += 1
        return [torch.randn(4, 6), 3, {"scale": [1.0]}]


def test_cached_case_equals_a_fresh_generation_and_is_generated_once():
    problem, cache = _Problem(), CaseInputCache()
    first = cache.get(problem, 123)
    again = cache.get(problem, 123)
    other = cache.get(problem, 124)
    assert problem.calls == 2
    assert torch.equal(first[0], again[0]) and first is not again
    assert not torch.equal(other[0], first[0])
    assert torch.equal(first[0], seeded_inputs(problem, 123)[0])


def test_non_tensor_values_are_copies_so_model_code_cannot_change_the_cache():
    problem, cache = _Problem(), CaseInputCache()
    cache.get(problem, 1)[2]["scale"].append(99.0)
    assert cache.get(problem, 1)[2] == {"scale": [1.0]}


def test_shape_variants_are_separate_entries():
    problem, cache = _Problem(), CaseInputCache()
    base = cache.get(problem, 5)
    resized = cache.get(problem, 5, [[2, 3], None, None])
    assert list(resized[0].shape) == [2, 3] and list(base[0].shape) == [4, 6]
    assert torch.equal(resized[0].reshape(-1), base[0].reshape(-1)[:6])


def test_the_cache_is_bounded_by_bytes():
    problem = _Problem()
    cache = CaseInputCache(max_bytes=4 * 6 * 4 * 2)  # room for two cases
    for seed in range(4):
        cache.get(problem, seed)
    cache.get(problem, 0)  # evicted: generated again
    assert problem.calls == 5
    cache.get(problem, 3)  # still there
    assert problem.calls == 5


def test_to_device_copies_even_when_nothing_moves():
    x = torch.randn(3)
    (y,) = to_device([x], torch.device("cpu"))
    y.add_(1)
    assert not torch.equal(x, y)


def test_stopwatch_accumulates_sections():
    watch = Stopwatch()
    with watch.section("a"):
        pass
    watch.add("a", 1.0)
    watch.add("b", 0.25)
    watch.add_since("c", watch.now() - 2.0)
    assert watch.to_json()["a"] >= 1.0 and watch.to_json()["b"] == 0.25
    assert watch.to_json()["c"] >= 2.0


def test_a_started_worker_runs_its_task_after_preloading_and_is_closed():
    from kernelstitch.agents.verifier.runner import EXITS, StartedWorker, run_task

    task = "kernelstitch.core.worker.builtin_tasks:ping"
    worker = StartedWorker(task, None)
    outcome = run_task(task, {}, 60, None, None, worker)
    assert outcome.ok and outcome.result["pid"] > 0
    EXITS.wait()  # its exit overlaps what follows; a verification waits for it at its end
    assert worker.client.pid is None  # closed after its one task


def test_a_spare_worker_is_kept_for_the_next_call_and_taken_once():
    from kernelstitch.agents.verifier.runner import EXITS, SpareWorkers, run_task

    task = "kernelstitch.core.worker.builtin_tasks:ping"
    spares = SpareWorkers()
    assert spares.take(task, None) is None
    spares.start(task, None)
    spares.start(task, None)  # one spare per (task, device): the second start is a no-op
    spare = spares.take(task, None)
    assert spare is not None and spares.take(task, None) is None
    outcome = run_task(task, {}, 60, None, None, spare)
    assert outcome.ok
    spares.start(task, 0)
    spares.close_all()
    assert spares.take(task, 0) is None
    EXITS.wait()
    assert spare.client.pid is None


def test_variant_inputs_resize_the_cached_inputs_of_their_seed():
    problem, cache = _Problem(), CaseInputCache()
    resized = cache.get(problem, 8, [[3, 2], None, None])
    base = cache.get(problem, 8)
    assert problem.calls == 1  # the seed's inputs were generated once, for both entries
    assert torch.equal(resized[0].reshape(-1), base[0].reshape(-1)[:6])
    assert torch.equal(base[0], seeded_inputs(problem, 8)[0])


def test_preload_runs_a_modules_warm_up_hook(monkeypatch):
    import types

    from kernelstitch.core.worker.builtin_tasks import preload

    calls = []
    module = types.ModuleType("kernelstitch._warm_up_probe")
    module.warm_up = lambda: calls.append("warm")
    monkeypatch.setitem(__import__("sys").modules, module.__name__, module)
    preload(module.__name__)
    assert calls == ["warm"]


def test_preload_imports_only_our_own_modules():
    from kernelstitch.core.worker.builtin_tasks import preload

    assert preload("kernelstitch.agents.verifier.stats")["module"].endswith("stats")
    with pytest.raises(ValueError):
        preload("os")
