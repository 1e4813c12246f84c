"""Verifier inputs and speed-ups that must not change what is checked: case inputs generated from the seed on the case's device, stage timing, workers started ahead of their task (CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kernelstitch.agents.verifier.inputs import case_inputs, digest, seeded_inputs
from kernelstitch.agents.verifier.stopwatch import Stopwatch

CPU = torch.device("cpu")


class _Problem:
    """The one method case_inputs uses, counting how often inputs are generated and where the
    default device pointed while they were."""

    def __init__(self) -> None:
        self.calls = 0
        self.devices: list[str] = []

    def inputs(self):
        self.calls += 1
        self.devices.append(str(torch.empty(0).device))
        return [torch.randn(4, 6), 3, {"scale": [1.0]}]


def test_the_same_seed_gives_the_same_inputs_in_a_fresh_generation_each_time():
    problem = _Problem()
    first = case_inputs(problem, 123, None, CPU)
    again = case_inputs(problem, 123, None, CPU)
    other = case_inputs(problem, 124, None, CPU)
    assert problem.calls == 3  # nothing is cached: model code never sees a reused tensor
    assert torch.equal(first[0], again[0]) and first[0] is not again[0]
    assert not torch.equal(other[0], first[0])
    assert torch.equal(first[0], seeded_inputs(problem, 123, CPU)[0])


def test_inputs_are_generated_with_the_case_device_as_default():
    problem = _Problem()
    case_inputs(problem, 1, None, torch.device("meta"))
    assert problem.devices == ["meta"]  # torch.randn(...) in get_inputs lands on that device


def test_non_tensor_values_are_fresh_so_model_code_cannot_change_the_next_case():
    problem = _Problem()
    case_inputs(problem, 1, None, CPU)[2]["scale"].append(99.0)
    assert case_inputs(problem, 1, None, CPU)[2] == {"scale": [1.0]}


def test_variant_inputs_resize_the_inputs_of_their_seed():
    problem = _Problem()
    base = case_inputs(problem, 8, None, CPU)
    resized = case_inputs(problem, 8, [[3, 2], None, None], CPU)
    longer = case_inputs(problem, 8, [[5, 6], None, None], CPU)
    assert list(resized[0].shape) == [3, 2]
    assert torch.equal(resized[0].reshape(-1), base[0].reshape(-1)[:6])
    flat = base[0].reshape(-1)
    assert torch.equal(longer[0].reshape(-1), torch.cat([flat, flat.flip(0)])[:30])


def test_the_digest_tells_different_inputs_apart_and_equal_ones_together():
    problem = _Problem()
    a = digest(case_inputs(problem, 5, None, CPU))
    assert a == digest(case_inputs(problem, 5, None, CPU))
    assert a != digest(case_inputs(problem, 6, None, CPU))
    x = torch.zeros(1001, dtype=torch.uint8)  # not a whole number of 32-bit words
    y = x.clone()
    y[-1] = 1
    assert digest([x]) != digest([y])
    assert digest([x]) != digest([x.float()])  # the dtype is part of it


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
