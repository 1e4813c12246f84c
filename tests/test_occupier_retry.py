"""The side-stream check's occupier is made again before a check where loading could not make it
(GPU memory short beside other verifications), a bounded number of times, with one note however
often it fails; an occupier whose work fails is dropped, not the candidate's check."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from kernelstitch.agents.verifier import candidate_task


class _FlakyOccupier:
    made = 0
    fail_first = 2
    fail_calls = False

    def __init__(self, device) -> None:
        type(self).made += 1
        if type(self).made <= type(self).fail_first:
            raise RuntimeError(f"CUDA out of memory ({type(self).made} MiB free)")  # texts vary

    def __call__(self) -> None:
        if type(self).fail_calls:
            raise RuntimeError("CUDA out of memory (cuBLAS workspace)")


@pytest.fixture
def flaky(monkeypatch):
    monkeypatch.setattr(candidate_task, "_Occupier", _FlakyOccupier)
    monkeypatch.setattr(candidate_task, "_empty_cache", lambda: None)
    _FlakyOccupier.made, _FlakyOccupier.fail_first, _FlakyOccupier.fail_calls = 0, 2, False
    return _FlakyOccupier


def _state():
    return candidate_task._State(model=None, problem=None, device="cpu", judge=None, plan=None,
                                 ref_mutates=False, ref_aliases=False)


def _loaded_without_occupier():
    state = _state()
    state.occupier = candidate_task._make_occupier("cpu", state.notes)  # at load: fails
    assert state.occupier is None
    return state


def test_the_occupier_is_made_again_at_the_next_check(flaky):
    state = _loaded_without_occupier()
    candidate_task._ensure_occupier(state)  # first check: fails again, no second note
    assert state.occupier is None
    assert len(state.notes) == 1 and state.notes[0].startswith(candidate_task.OCCUPIER_NOTE)
    candidate_task._ensure_occupier(state)  # next check: made
    assert isinstance(state.occupier, flaky)
    made = flaky.made
    candidate_task._ensure_occupier(state)  # kept, not made again
    assert flaky.made == made


def test_attempts_are_bounded(flaky):
    flaky.fail_first = 100
    state = _loaded_without_occupier()
    for _ in range(10):
        candidate_task._ensure_occupier(state)
    assert flaky.made == candidate_task.OCCUPIER_ATTEMPTS and state.occupier is None
    assert len(state.notes) == 1


def test_an_occupier_whose_work_fails_is_dropped_with_the_note(flaky):
    flaky.fail_first = 0
    state = _state()
    state.occupier = candidate_task._make_occupier("cpu", state.notes)
    assert state.occupier is not None and state.notes == []
    flaky.fail_calls = True
    candidate_task._occupy(state)  # no exception reaches the check
    assert state.occupier is None and state.notes[0].startswith(candidate_task.OCCUPIER_NOTE)
