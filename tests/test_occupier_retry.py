"""The side-stream check's occupier is made again at the next check where loading could not
make it (GPU memory short beside other verifications), with one note however often it fails."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from kernelstitch.agents.verifier import candidate_task


class _FlakyOccupier:
    made = 0
    fail_first = 2

    def __init__(self, device) -> None:
        type(self).made += 1
        if type(self).made <= type(self).fail_first:
            raise RuntimeError("CUDA out of memory")


def _state():
    return candidate_task._State(model=None, problem=None, device="cpu", judge=None, plan=None,
                                 ref_mutates=False, ref_aliases=False)


def test_the_occupier_is_made_again_at_the_next_check(monkeypatch):
    monkeypatch.setattr(candidate_task, "_Occupier", _FlakyOccupier)
    monkeypatch.setattr(candidate_task, "_empty_cache", lambda: None)
    _FlakyOccupier.made = 0
    state = _state()
    state.occupier = candidate_task._make_occupier("cpu", state.notes)  # at load: fails
    assert state.occupier is None
    candidate_task._ensure_occupier(state)  # first check: fails again, no second note
    assert state.occupier is None
    assert len(state.notes) == 1 and "without an occupier" in state.notes[0]
    candidate_task._ensure_occupier(state)  # next check: made
    assert isinstance(state.occupier, _FlakyOccupier)
    made = _FlakyOccupier.made
    candidate_task._ensure_occupier(state)  # kept, not made again
    assert _FlakyOccupier.made == made
